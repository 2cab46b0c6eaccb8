//! deploy/kubernetes/ validated offline (no cluster is available here): rendered with
//! `kubectl kustomize` (Debian's kubernetes-client, or the machine's kubectl), then every
//! rendered object checked against the Kubernetes schemas with `kubernetes-validate --strict`
//! (PyPI, .deps/py-k8s), and the facts the README promises checked on the objects themselves.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{BIN, deps, py_driver, repo_root, require};

/// Runs `cmd`; returns (success, stdout, stderr).
fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Copies the files of `from` (one level: the kustomization is flat) into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// The objects kind/name -> object.
fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == json!(kind))
        .unwrap_or_else(|| panic!("no {kind} rendered"))
}

#[test]
fn the_manifests_render_with_kustomize_and_validate_against_the_schemas() {
    crate::support::needs_deps!();
    let validate = deps().join("py-k8s/bin/kubernetes-validate");
    let python = deps().join("py-k8s/bin/python");
    require(&[validate.clone(), python.clone()]);
    assert!(
        run(Command::new("kubectl").args(["version", "--client"])).0,
        "kubectl is missing: run scripts/bootstrap (it installs Debian's kubernetes-client)"
    );

    // The kustomization with the secret files a user makes (README.md), made the same way.
    let dir = tempfile::tempdir().unwrap();
    let kust = dir.path().join("kubernetes");
    copy_dir(&repo_root().join("deploy/kubernetes"), &kust);
    let secrets = kust.join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    for key in ["secret.key", "request-state.key"] {
        let file = secrets.join(key);
        let (ok, out, err) = run(Command::new(BIN)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["secret", "new-key", "--secret-key-file"])
            .arg(&file));
        assert!(ok, "secret new-key: {out}{err}");
    }
    std::fs::write(secrets.join("tokens"), "alice s3cret tools:write\n").unwrap();
    std::fs::write(
        secrets.join("database-url"),
        "postgres://omniforge@postgresql:5432/omniforge",
    )
    .unwrap();
    std::fs::write(secrets.join("pgpassword"), "pw").unwrap();

    let (ok, rendered, err) = run(Command::new("kubectl").arg("kustomize").arg(&kust));
    assert!(ok, "kubectl kustomize failed: {err}");
    let out = dir.path().join("rendered.yaml");
    std::fs::write(&out, &rendered).unwrap();

    // Every object against the schemas, strictly (no unknown fields).
    let (ok, stdout, stderr) = run(Command::new(&validate).args(["--strict"]).arg(&out));
    assert!(ok, "kubernetes-validate:\n{stdout}\n{stderr}");
    let objects: Value = serde_json::from_str(
        &run(Command::new(&python)
            .arg(py_driver("kubernetes_objects.py"))
            .arg(&out))
        .1,
    )
    .unwrap();
    let objects = objects.as_array().unwrap();
    let passed = stdout.lines().filter(|l| l.contains(" passed ")).count();
    assert_eq!(passed, objects.len(), "one pass per object:\n{stdout}");

    // The validator is not vacuous: an unknown field fails it.
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        rendered.replacen(
            "  revisionHistoryLimit: 5",
            "  revisionHistoryLimit: 5\n  rollingUpgrade: true",
            1,
        ),
    )
    .unwrap();
    assert!(
        !run(Command::new(&validate).args(["--strict"]).arg(&broken)).0,
        "kubernetes-validate accepted an unknown Deployment field"
    );

    let mut kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "CronJob",
            "Deployment",
            "HorizontalPodAutoscaler",
            "Namespace",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Secret",
            "Secret",
            "Secret",
            "Service"
        ]
    );
    for object in objects {
        let namespaced = object["kind"] != json!("Namespace");
        if namespaced {
            assert_eq!(
                object["metadata"]["namespace"],
                json!("omniforge"),
                "{object}"
            );
        }
    }

    // The Deployment: the grace covers preStop plus the server's shutdown grace, both probes
    // on /healthz, and the security context of deploy/image/README.md.
    let deployment = find(objects, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let server = &pod["containers"][0];
    let config = find(objects, "ConfigMap")["data"]["omniforge.toml"]
        .as_str()
        .unwrap();
    let grace: u64 = config
        .lines()
        .find_map(|l| l.strip_prefix("shutdown_grace = \""))
        .and_then(|v| v.strip_suffix("s\""))
        .expect("shutdown_grace = \"Ns\" in omniforge.toml")
        .parse()
        .unwrap();
    let pre_stop: u64 = server["lifecycle"]["preStop"]["exec"]["command"][1]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let termination = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        termination > pre_stop + grace,
        "terminationGracePeriodSeconds {termination} must exceed preStop {pre_stop} + shutdown_grace {grace}"
    );
    for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
        assert_eq!(
            server[probe]["httpGet"]["path"],
            json!("/healthz"),
            "{probe}"
        );
    }
    assert_eq!(deployment["spec"]["strategy"]["type"], json!("Recreate"));
    assert_eq!(pod["securityContext"]["runAsUser"], json!(10001));
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        json!("Localhost")
    );
    assert_eq!(
        server["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    assert_eq!(
        server["securityContext"]["allowPrivilegeEscalation"],
        json!(false)
    );
    assert_eq!(
        server["securityContext"]["readOnlyRootFilesystem"],
        json!(true)
    );
    assert_eq!(server["securityContext"]["procMount"], json!("Unmasked"));
    // kustomize's images: and generated names reached the pod spec.
    assert_eq!(
        server["image"],
        json!("registry.example.com/omniforge:0.1.0")
    );
    let secret_names: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == json!("Secret"))
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    let volumes = pod["volumes"].as_array().unwrap();
    for volume in volumes.iter().filter(|v| v.get("secret").is_some()) {
        let name = volume["secret"]["secretName"].as_str().unwrap();
        assert!(
            secret_names.contains(&name),
            "{name} is not a rendered Secret"
        );
    }

    // The NetworkPolicy: PostgreSQL and DNS selectors untouched by commonLabels, and 443 out
    // to public addresses only.
    let policy = find(objects, "NetworkPolicy");
    let egress = policy["spec"]["egress"].as_array().unwrap();
    assert!(
        egress.iter().all(|rule| rule["to"]
            .as_array()
            .unwrap()
            .iter()
            .all(|to| to["podSelector"].get("matchLabels").is_none())),
        "a foreign pod selector got our labels: {policy}"
    );
    let public = egress
        .iter()
        .find(|r| r["ports"][0]["port"] == json!(443))
        .unwrap();
    let except = &public["to"][0]["ipBlock"]["except"];
    for range in [
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
    ] {
        assert!(
            except.as_array().unwrap().contains(&json!(range)),
            "{public}"
        );
    }

    // The config file is one the server accepts (unknown keys are refused).
    let toml = dir.path().join("omniforge.toml");
    std::fs::write(&toml, config).unwrap();
    let (ok, out, err) = run(Command::new(BIN)
        .arg("--config")
        .arg(&toml)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["doctor", "--sandbox", "off"]));
    assert!(ok, "the ConfigMap's omniforge.toml: {out}{err}");
}
