//! The network while a tool has it off: TCP, UDP and DNS, with a `network: true` control.

use super::*;

pub(super) async fn escape_tcp_connection_while_network_off(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("TCP/UDP with network off", mode);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let uport = udp.local_addr().unwrap().port();
    let body = r#"
import socket
def tcp(host, port):
    with socket.create_connection((host, port), timeout=3) as s:
        s.sendall(b"hello from the sandbox")
    return "CONNECTED"
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"hello from the sandbox", ("127.0.0.1", ARGS["uport"]))
    return "SENT (no error)"
probe("tcp 127.0.0.1", lambda: tcp("127.0.0.1", ARGS["port"]))
probe("udp 127.0.0.1", udp)
probe("tcp 192.0.2.1:80", lambda: tcp("192.0.2.1", 80))
probe("dns pypi.org", lambda: socket.getaddrinfo("pypi.org", 443))
probe("interfaces", lambda: socket.if_nameindex())
"#;
    sc.tool("dial", body, json!({})).await;
    sc.tool("dial_allowed", body, json!({"network": true}))
        .await;
    let args = json!({"port": port, "uport": uport});
    let call = sc
        .attack(&mut v, "dial", args.clone(), Duration::from_secs(10))
        .await;
    let accepted = |listener: &TcpListener| {
        let mut n = 0;
        while let Ok((mut stream, _)) = listener.accept() {
            let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
            let mut buf = Vec::new();
            let _ = stream.read_to_end(&mut buf);
            n += 1;
        }
        n
    };
    let datagrams = |udp: &UdpSocket| {
        let mut n = 0;
        let mut buf = [0u8; 256];
        while udp.recv_from(&mut buf).is_ok() {
            n += 1;
        }
        n
    };
    // scenario: nothing arrives: a late connection or datagram would have within 100 ms
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (tcp_n, udp_n) = (accepted(&listener), datagrams(&udp));
    v.saw(format!(
        "the test's 127.0.0.1:{port} listener accepted {tcp_n}, its UDP socket got {udp_n}"
    ));
    if tcp_n > 0 {
        v.leak(format!(
            "the listener on 127.0.0.1:{port} accepted {tcp_n} connection(s)"
        ));
    }
    if udp_n > 0 {
        v.leak(format!(
            "the UDP socket on 127.0.0.1:{uport} received {udp_n} datagram(s)"
        ));
    }
    if let Some(call) = call {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        for p in ["tcp 127.0.0.1", "tcp 192.0.2.1:80", "dns pypi.org"] {
            match find(&obs, p) {
                Some(o) if o.ok => v.leak(format!("{p}: {}", o.detail)),
                Some(o) => v.layer(layer_of(o, mode)),
                None => v.problem(format!("no probe {p:?}: {}", short(&call.text(), 2000))),
            }
        }
    }
    // Control: with `network: true` the same script reaches the listener, so a leak would
    // have been seen.
    match call_tool(&mut sc.s, "dial_allowed", args, Duration::from_secs(20)).await {
        Ok(control) => {
            // The control's connection is in the listener's backlog once the call answered;
            // waited for (a second one would be counted too).
            let mut n = 0;
            let _ = try_eventually(Duration::from_secs(2), async || {
                n += accepted(&listener);
                (n > 0).then_some(())
            })
            .await;
            let said = find(&observations(&control.text()), "tcp 127.0.0.1").map(Obs::what);
            v.saw(format!(
                "control with network: true: {said:?}, accepted {n}"
            ));
            if n != 1 {
                v.problem(format!(
                    "control: with network: true the listener accepted {n}, want 1 ({said:?})"
                ));
            }
        }
        Err(e) => v.problem(format!("control call failed: {e}")),
    }
    sc.finish(&mut server, v).await;
}
