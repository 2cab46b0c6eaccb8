//! A malformed manifest at start-up fails with a message naming the file, the tool and the field.

use super::*;

/// A tool whose inputSchema is not an object schema: `serve` and `bridge` refuse to start,
/// and stderr names the file, the tool and the field.
#[tokio::test]
async fn malformed_manifest_fails_start_up() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken-manifest.json");
    let mut doc: Value =
        serde_json::from_slice(&std::fs::read(fixture_manifest()).unwrap()).unwrap();
    doc["tools"][2]["inputSchema"] = json!({"type": "array"});
    let tool = doc["tools"][2]["name"].as_str().unwrap().to_owned();
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();

    for sub in ["serve", "bridge"] {
        let mut cmd = Command::new(BIN);
        cmd.arg(sub);
        if sub == "serve" {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        let mut child = cmd
            .arg("--data-dir")
            .arg(&data)
            .arg("--manifest")
            .arg(&path)
            .args(["--upstream", "http://127.0.0.1:9"])
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stderr = Captured::default();
        let stderr_done = drain(child.stderr.take().unwrap(), stderr.clone());
        let stdout = Captured::default();
        drain(child.stdout.take().unwrap(), stdout.clone());
        let status = match tokio::time::timeout(Duration::from_secs(20), child.wait()).await {
            Ok(Ok(status)) => status,
            _ => {
                kill_and_reap(&mut child);
                panic!(
                    "omniforge {sub} with a malformed manifest did not exit within 20 s; \
                     stderr:\n{}",
                    stderr.tail(4000)
                )
            }
        };
        // The capture is complete at the pipe's EOF.
        let _ = tokio::time::timeout(Duration::from_secs(5), stderr_done).await;
        let err = stderr.text();
        assert!(
            !status.success(),
            "omniforge {sub} with a malformed manifest must exit non-zero, got {status}; \
             stderr:\n{err}"
        );
        for (what, needle) in [
            ("the file", path.to_str().unwrap()),
            ("the tool", tool.as_str()),
            ("the field", "inputSchema"),
        ] {
            assert!(
                err.contains(needle),
                "omniforge {sub}: stderr must name {what} ({needle:?}); stderr:\n{err}"
            );
        }
        assert!(
            panic_lines(&err).is_empty(),
            "omniforge {sub} panicked: {err}"
        );
        assert!(
            stdout.text().is_empty() || sub == "serve",
            "omniforge {sub} wrote to stdout: {}",
            stdout.text()
        );
    }
    eprintln!(
        "manifest_tools::malformed_manifest_fails_start_up: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}
