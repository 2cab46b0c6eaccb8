//! Resource bombs: fork and memory bombs, an endless loop, an output flood.

use super::*;

pub(super) async fn escape_fork_bomb(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("fork bomb", mode);
    // Every process forks until fork fails; the lingerers then become `sleep` with the
    // marker as argv[0], so the host can count and find them.
    let body = r#"
import time
marker = ARGS["marker"]
root = os.getpid()
forks, err = 0, None
end = time.time() + 5
while time.time() < end:
    try:
        pid = os.fork()
    except OSError as e:
        err = e
        if os.getpid() == root:
            break
        os.execv("/usr/bin/sleep", [marker, "60"])
    if pid and os.getpid() == root:
        forks += 1
if os.getpid() != root:
    os.execv("/usr/bin/sleep", [marker, "60"])
note("forks by the first process", True, forks)
if err is not None:
    note("fork", False, exc=err)
else:
    note("fork", True, "never failed in 5 s")
time.sleep(0.5)
"#;
    sc.tool("fork_bomb", body, json!({})).await;
    let watch = Watch::start(&sc.marker);
    let call = sc
        .attack(
            &mut v,
            "fork_bomb",
            json!({"marker": sc.marker}),
            Duration::from_secs(15),
        )
        .await;
    let most = watch.finish();
    v.saw(format!(
        "at most {most} marked processes alive at once on the host"
    ));
    if let Some(call) = call {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        match find(&obs, "fork") {
            Some(o) if !o.ok => v.layer(layer_of(o, mode)),
            Some(o) => v.leak(format!("fork never failed: {}", o.detail)),
            None => v.problem(format!("no probe `fork`: {}", short(&call.text(), 2000))),
        }
    }
    if most > 128 {
        v.leak(format!("{most} processes at once, over pids.max 128"));
    }
    sc.finish(&mut server, v).await;
}

pub(super) async fn escape_memory_bomb(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("memory bomb", mode);
    let body = r#"
chunks = []
try:
    while True:
        chunks.append(b"\x01" * (64 << 20))
        if len(chunks) > 1024:
            break
except MemoryError as e:
    n = len(chunks)
    chunks = None
    note("allocate", False, exc=e)
    note("MiB allocated before", True, n * 64)
else:
    note("allocate", True, f"{len(chunks) * 64} MiB and no MemoryError")
"#;
    sc.tool("memory_bomb", body, json!({})).await;
    if let Some(call) = sc
        .attack(&mut v, "memory_bomb", json!({}), Duration::from_secs(20))
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        match find(&obs, "allocate") {
            Some(o) if !o.ok => v.layer(layer_of(o, mode)),
            Some(o) => v.leak(format!("no MemoryError: {}", o.detail)),
            None => {
                // Killed before it could say anything: a signal ends the run.
                if call.is_error() {
                    v.layer(format!("killed: {}", short(&call.text(), 80)));
                } else {
                    v.problem(format!(
                        "no probe `allocate`: {}",
                        short(&call.text(), 2000)
                    ));
                }
            }
        }
        if let Some(n) =
            find(&obs, "MiB allocated before").and_then(|o| o.detail.parse::<u64>().ok())
            && n > 2048
        {
            v.leak(format!("{n} MiB allocated, over the 2 GiB RLIMIT_AS"));
        }
    }
    sc.finish(&mut server, v).await;
}

pub(super) async fn escape_infinite_loop(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("infinite loop (timeout_s 1)", mode);
    let body = "print('looping', flush=True)\nwhile True:\n    pass\n";
    sc.tool("spin", body, json!({"timeout_s": 1})).await;
    if let Some(call) = sc
        .attack(&mut v, "spin", json!({}), Duration::from_secs(6))
        .await
    {
        let text = call.text();
        v.saw(format!("result: {:?}", short(&text, 300)));
        timeout_layer(&mut v, &call);
    }
    sc.finish(&mut server, v).await;
}

/// Names the layer that ended a run that had to be stopped.
pub(super) fn timeout_layer(v: &mut Verdict, call: &Call) {
    let text = call.text();
    if !call.is_error() {
        v.leak(format!(
            "the run was not stopped: isError false, {:?}",
            short(&text, 300)
        ));
    } else if text.contains("[timeout]") {
        v.layer("timeout+process-group (killpg, PID ns teardown)");
    } else if text.contains("[exit 152]") || text.contains("SIGXCPU") {
        v.layer("rlimits (RLIMIT_CPU)");
    } else {
        v.problem(format!("stopped, but by what? {:?}", short(&text, 300)));
    }
}

pub(super) async fn escape_output_flood(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("100 MB of output", mode);
    let body = r#"
import threading
chunk = b"x" * (1 << 20)
def flood(stream):
    for _ in range(100):
        stream.write(chunk)
    stream.flush()
t = threading.Thread(target=flood, args=(sys.stderr.buffer,))
t.start()
flood(sys.stdout.buffer)
t.join()
"#;
    sc.tool("flood", body, json!({})).await;
    let rss_before = rss_kib(server.pid());
    if let Some(call) = sc
        .attack(&mut v, "flood", json!({}), Duration::from_secs(30))
        .await
    {
        let rss_after = rss_kib(server.pid());
        let text = call.text();
        let xs = text.bytes().filter(|&b| b == b'x').count();
        let cut = Regex::new(r"\[(\d+) more bytes not shown\]").unwrap();
        let marker = cut.captures(&text).map(|c| c[1].to_owned());
        v.saw(format!(
            "{} bytes of text ({xs} x), cut marker: {marker:?}, tail {:?}; server RSS {} -> {} MiB",
            text.len(),
            short(&text[text.len().saturating_sub(200)..], 200),
            rss_before >> 10,
            rss_after >> 10
        ));
        if text.len() > 70_000 {
            v.leak(format!("{} bytes of text reached the client", text.len()));
        }
        if marker.is_none() {
            v.problem("the cut result does not say how many bytes were left out");
        }
        if rss_after > rss_before + (64 << 10) {
            v.leak(format!(
                "the server's RSS grew by {} MiB",
                (rss_after - rss_before) >> 10
            ));
        }
        v.layer("capture cap (1 MiB kept per stream, rest drained) + result cut (64 KiB)");
    }
    sc.finish(&mut server, v).await;
}
