//! SOCK_SEQPACKET messages with file descriptors (SCM_RIGHTS) and the sender's credentials
//! (SCM_CREDENTIALS, when the receiving socket has SO_PASSCRED), through raw libc calls.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tokio::io::unix::AsyncFd;

const MAX_FDS: usize = 8;

/// One message read: its bytes, the descriptors it carried, and the sender's pid as seen
/// from this process's PID namespace (when credentials were attached).
pub struct Received {
    pub data: Vec<u8>,
    pub fds: Vec<OwnedFd>,
    pub pid: Option<i32>,
}

/// A connected `(ours, theirs)` SOCK_SEQPACKET pair, both close-on-exec.
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socketpair just returned these two fresh descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: plain fcntl calls on an open descriptor.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sends `data` with `fds` attached. Blocking semantics come from the socket's flags.
pub fn send(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of_val(fds) as u32) } as usize;
    let mut cbuf = vec![0u8; space.max(1)];
    // SAFETY: zeroed msghdr is a valid initial value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space;
        // SAFETY: the control buffer is large enough for one header with `fds.len()` ints.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr() as *const u8,
                libc::CMSG_DATA(c),
                std::mem::size_of_val(fds),
            );
        }
    }
    // SAFETY: msg points at live buffers for the duration of the call.
    let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads one message. `Ok(None)` at end of stream.
pub fn recv(sock: RawFd) -> io::Result<Option<Received>> {
    let mut buf = vec![0u8; 64 << 10];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: pure computations.
    let space = unsafe {
        libc::CMSG_SPACE((MAX_FDS * size_of::<RawFd>()) as u32)
            + libc::CMSG_SPACE(size_of::<libc::ucred>() as u32)
    } as usize;
    let mut cbuf = vec![0u8; space];
    // SAFETY: zeroed msghdr is a valid initial value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space;
    // SAFETY: msg points at live buffers for the duration of the call.
    let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    let mut pid = None;
    // SAFETY: walking the control messages the kernel just wrote, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            let len = (*c).cmsg_len as usize - (data as usize - c as usize);
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                for i in 0..len / size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned((data as *const RawFd).add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            } else if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_CREDENTIALS
            {
                let cred = std::ptr::read_unaligned(data as *const libc::ucred);
                pid = Some(cred.pid);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if n == 0 && fds.is_empty() {
        return Ok(None);
    }
    buf.truncate(n as usize);
    Ok(Some(Received {
        data: buf,
        fds,
        pid,
    }))
}

/// `recv` on a non-blocking socket registered with tokio.
pub async fn recv_async(sock: &AsyncFd<OwnedFd>) -> io::Result<Option<Received>> {
    loop {
        let mut guard = sock.readable().await?;
        match guard.try_io(|s| recv(s.get_ref().as_raw_fd())) {
            Ok(r) => return r,
            Err(_would_block) => continue,
        }
    }
}

/// Registers a descriptor we own with tokio's reactor.
pub fn async_fd(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an `OwnedFd` stays open for as long as the `AsyncFd` holds it.
    Ok(unsafe { AsyncFd::register(fd) }?)
}

/// A JSON message as bytes.
pub fn json(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("a Value always serializes")
}
