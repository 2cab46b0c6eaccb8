//! Environments: lock, build, share, wheels-only, gc, uv.

use std::collections::HashSet;
use std::sync::Mutex;

use omniforge_script::*;

use crate::util::*;

#[tokio::test]
async fn build_with_a_dependency_and_import_it_offline() {
    let data = fresh_data_dir();
    let builder = builder_in(data.path(), false).await;
    let lock = builder.lock(&["humanize".to_owned()]).await.unwrap();
    assert!(
        lock.requirements.contains("humanize=="),
        "{}",
        lock.requirements
    );
    assert!(
        lock.requirements.contains("--hash=sha256:"),
        "{}",
        lock.requirements
    );
    assert_eq!(lock.env_id.len(), 64);

    let events = Mutex::new(Vec::new());
    let env = builder
        .build(&lock, |e| events.lock().unwrap().push(e))
        .await
        .unwrap();
    let events = events.into_inner().unwrap();
    assert_eq!(events.first(), Some(&ProgressEvent::CreatingVenv));
    assert!(
        events.contains(&ProgressEvent::Installing { packages: 1 }),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| matches!(e, ProgressEvent::Output(_))),
        "{events:?}"
    );
    assert_eq!(
        events.last(),
        Some(&ProgressEvent::Installed { packages: 1 })
    );
    assert_eq!(env.path, builder.envs_dir().join(&lock.env_id));

    let mut s = RunSpec::new(
        &env,
        "import humanize, omniforge\nprint(humanize.intcomma(1234567))\n",
    );
    s.network = false;
    let runner = sandboxed();
    assert_layer(&runner, "no-network");
    let out = run(&runner, s).await;
    assert_eq!(stdout(&out), "1,234,567\n", "{out:?}");
}

#[tokio::test]
async fn identical_locks_share_one_env() {
    let data = fresh_data_dir();
    let builder = builder_in(data.path(), false).await;
    let a = builder.lock(&[]).await.unwrap();
    let b = builder.lock(&[]).await.unwrap();
    assert_eq!(a, b);
    // Two concurrent builds of the same lock: one wins the rename, both get the same env.
    let (x, y) = tokio::join!(builder.build(&a, |_| {}), builder.build(&b, |_| {}));
    let (x, y) = (x.unwrap(), y.unwrap());
    assert_eq!(x, y);
    let reused = Mutex::new(Vec::new());
    let z = builder
        .build(&a, |e| reused.lock().unwrap().push(e))
        .await
        .unwrap();
    assert_eq!(z, x);
    assert_eq!(reused.into_inner().unwrap(), [ProgressEvent::Reused]);
    let dirs: Vec<_> = std::fs::read_dir(builder.envs_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        dirs,
        [std::ffi::OsString::from(&a.env_id)],
        "no build directory left behind"
    );

    // The env id covers the requirements and the build flags.
    let source_ok = builder_in(data.path(), true).await;
    assert_ne!(source_ok.lock(&[]).await.unwrap().env_id, a.env_id);
    assert_ne!(
        builder
            .lock_from_requirements("six==1.17.0\n".into())
            .env_id,
        a.env_id
    );
    assert_eq!(builder.lock_from_requirements(String::new()), a);
}

#[tokio::test]
async fn source_only_package_fails_under_wheels_only() {
    let builder = shared_builder().await;
    // docopt 0.6.2 is published as a source distribution only.
    let err = builder
        .lock(&["docopt==0.6.2".to_owned()])
        .await
        .unwrap_err();
    match &err {
        EnvError::Uv { step, stderr, .. } => {
            assert_eq!(*step, "uv pip compile");
            assert!(
                stderr.contains("docopt") && stderr.contains("wheel"),
                "{stderr}"
            );
        }
        other => panic!("expected a uv error, got {other:?}"),
    }
    eprintln!("{err}");
}

#[tokio::test]
async fn invalid_dependencies_are_refused_before_uv() {
    let builder = shared_builder().await;
    for dep in [
        "-e .",
        "pkg @ https://example.invalid/p.whl",
        "./local",
        "--index-url=x",
    ] {
        assert!(
            matches!(
                builder.lock(&[dep.to_owned()]).await,
                Err(EnvError::InvalidDependency { .. })
            ),
            "{dep}"
        );
    }
}

#[tokio::test]
async fn gc_removes_unused_envs() {
    let data = fresh_data_dir();
    let wheels = builder_in(data.path(), false).await;
    let sources = builder_in(data.path(), true).await;
    let keep = wheels
        .build(&wheels.lock(&[]).await.unwrap(), |_| {})
        .await
        .unwrap();
    let drop_me = sources
        .build(&sources.lock(&[]).await.unwrap(), |_| {})
        .await
        .unwrap();
    // A build in progress (fresh temporary directory) is left alone.
    std::fs::create_dir(wheels.envs_dir().join(".tmp-inprogress")).unwrap();
    let in_use: HashSet<String> = [keep.env_id.clone()].into();
    let removed = gc(&wheels.envs_dir(), &in_use).unwrap();
    assert_eq!(removed, std::slice::from_ref(&drop_me.env_id));
    assert!(keep.path.is_dir() && !drop_me.path.exists());
    assert!(wheels.envs_dir().join(".tmp-inprogress").is_dir());
    assert_eq!(
        gc(&data.path().join("missing"), &in_use).unwrap(),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn pep723_block_feeds_lock() {
    let code = "# /// script\n# dependencies = [\"humanize\"]\n# ///\nimport humanize\n";
    assert_eq!(pep723_dependencies(code).unwrap(), ["humanize"]);
}

/// The product installs uv itself when none is found: a venv with the pinned interpreter and
/// `pip install uv==UV_VERSION` from the registry.
#[tokio::test]
async fn uv_installs_into_the_data_dir() {
    let data = fresh_data_dir();
    let python = python().await;
    let uv = UvTool::install(data.path(), &python).await.unwrap();
    assert_eq!(uv.version(), UV_VERSION);
    assert_eq!(uv.path(), data.path().join("uv/bin/uv"));
    // Found again without installing.
    let again = UvTool::locate_or_install(data.path(), Some(uv.path().to_owned()), &python)
        .await
        .unwrap();
    assert_eq!(again.path(), uv.path());
    // An explicit uv that does not run is an error, not a silent fallback.
    let bad = UvTool::locate_or_install(data.path(), Some("/nonexistent/uv".into()), &python).await;
    assert!(matches!(bad, Err(EnvError::UvUnavailable(_))), "{bad:?}");
}
