//! The messages between the server and a warm template or one of its children: one JSON
//! object per `SOCK_SEQPACKET` message, descriptors attached as `SCM_RIGHTS`, and on the
//! server's side the sender's pid as the kernel gives it (`SO_PASSCRED`, translated into the
//! server's PID namespace: it cannot be forged from inside the sandbox, where no process has
//! `CAP_SYS_ADMIN`).
//!
//! Everything the template and its children send is untrusted input: the tool's code can
//! reach its child's socket. Messages are bounded ([`MAX_MESSAGE_BYTES`], [`MAX_FDS`]),
//! parsed into closed enums, and a truncated one is an error.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use serde::Deserialize;
use tokio::io::unix::AsyncFd;

/// The largest message the server sends (a call's environment is the biggest).
pub(crate) const MAX_MESSAGE_BYTES: usize = 256 << 10;
/// The largest message the server reads (the template's and its children's are small).
const MAX_RECEIVED_BYTES: usize = 64 << 10;
/// The most descriptors one message carries (the template's `/dev` entries are the most).
pub(crate) const MAX_FDS: usize = 64;

/// One message received.
#[derive(Debug)]
pub(crate) struct Received {
    /// The JSON text.
    pub(crate) body: Vec<u8>,
    /// The descriptors that came with it (closed when dropped).
    pub(crate) fds: Vec<OwnedFd>,
    /// The sender's pid in the server's PID namespace, when the socket has `SO_PASSCRED`.
    pub(crate) pid: Option<i32>,
}

impl Received {
    /// The body parsed as `T`.
    pub(crate) fn parse<'a, T: Deserialize<'a>>(&'a self) -> std::io::Result<T> {
        serde_json::from_slice(&self.body).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("an unexpected message from the warm template: {e}"),
            )
        })
    }
}

/// A connected `SOCK_SEQPACKET` pair, both ends close-on-exec.
pub(crate) fn seqpacket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Registers a socket with tokio (non-blocking from then on), asking the kernel for the
/// sender's credentials on every message read from it.
pub(crate) fn async_socket(fd: OwnedFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    rustix::net::sockopt::set_socket_passcred(&fd, true)?;
    rustix::io::ioctl_fionbio(&fd, true)?;
    crate::sys::async_fd(fd)
}

/// Sends `body` (JSON) with `fds` attached.
pub(crate) async fn send(
    sock: &AsyncFd<OwnedFd>,
    body: &serde_json::Value,
    fds: &[BorrowedFd<'_>],
) -> std::io::Result<()> {
    let data = serde_json::to_vec(body)?;
    if data.len() > MAX_MESSAGE_BYTES || fds.len() > MAX_FDS {
        return Err(std::io::Error::other(
            "a warm template message over its size limit",
        ));
    }
    loop {
        let mut guard = sock.writable().await?;
        match guard.try_io(|s| {
            let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
                return Err(std::io::Error::other("descriptors do not fit the message"));
            }
            rustix::net::sendmsg(
                s.get_ref(),
                &[IoSlice::new(&data)],
                &mut control,
                SendFlags::NOSIGNAL,
            )
            .map_err(std::io::Error::from)
        }) {
            Ok(result) => return result.map(drop),
            Err(_would_block) => continue,
        }
    }
}

/// Reads one message; `None` when the other side has closed its end.
pub(crate) async fn recv(sock: &AsyncFd<OwnedFd>) -> std::io::Result<Option<Received>> {
    loop {
        let mut guard = sock.readable().await?;
        match guard.try_io(|s| recv_now(s.get_ref().as_fd())) {
            Ok(result) => return result,
            Err(_would_block) => continue,
        }
    }
}

fn recv_now(sock: BorrowedFd<'_>) -> std::io::Result<Option<Received>> {
    let mut body = vec![0u8; MAX_RECEIVED_BYTES];
    let mut space =
        vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS), ScmCredentials(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        sock,
        &mut [IoSliceMut::new(&mut body)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    let mut pid = None;
    for message in control.drain() {
        match message {
            RecvAncillaryMessage::ScmRights(received) => fds.extend(received),
            RecvAncillaryMessage::ScmCredentials(cred) => {
                pid = Some(cred.pid.as_raw_nonzero().get())
            }
            _ => {}
        }
    }
    if got
        .flags
        .intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC)
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a truncated message from the warm template",
        ));
    }
    if got.bytes == 0 && fds.is_empty() {
        return Ok(None);
    }
    body.truncate(got.bytes);
    Ok(Some(Received { body, fds, pid }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_message_carries_its_descriptors_and_the_senders_pid() {
        let (a, b) = seqpacket_pair().unwrap();
        let (a, b) = (async_socket(a).unwrap(), async_socket(b).unwrap());
        let file = std::fs::File::open("/dev/null").unwrap();
        send(&a, &serde_json::json!({"op": "x"}), &[file.as_fd()])
            .await
            .unwrap();
        let got = recv(&b).await.unwrap().unwrap();
        assert_eq!(got.body, br#"{"op":"x"}"#);
        assert_eq!(got.fds.len(), 1);
        assert_eq!(got.pid, Some(std::process::id() as i32));
        drop(a);
        assert!(recv(&b).await.unwrap().is_none(), "end of stream");
    }
}
