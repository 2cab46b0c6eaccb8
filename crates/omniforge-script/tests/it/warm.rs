//! Warm templates (issue 15): a call forks a child of a template that started in the full
//! sandbox; isolation between calls, fallbacks, retirement.

use std::time::Duration;

use omniforge_script::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::util::*;

/// A pool (one template at most per key) in front of a sandboxed runner.
pub(crate) fn pool() -> WarmPool {
    let p = WarmPool::new(sandboxed(), WarmConfig::default());
    assert!(p.is_on(), "{:?}", p.report().off);
    p
}

async fn warm_run(pool: &WarmPool, key: &WarmKey, spec: RunSpec) -> RunOutput {
    pool.run(key, spec, CancellationToken::new()).await.unwrap()
}

#[tokio::test]
async fn a_prepared_template_runs_calls() {
    let pool = pool();
    let key = WarmKey::new("hello@1", "alice");
    let mut s = spec("import omniforge\nprint('hello', omniforge.args()['n'])\n").await;
    assert_eq!(pool.prepare(&key, &s).await, Prepared::Ready);
    for n in 0..3 {
        s.arguments = json!({"n": n});
        let out = warm_run(&pool, &key, s.clone()).await;
        assert_eq!(out.exit, Exit::Code(0), "{out:?}");
        assert_eq!(stdout(&out), format!("hello {n}\n"));
    }
    let report = pool.report();
    assert_eq!(report.templates.len(), 1);
    assert_eq!(report.templates[0].calls, 3, "{report:?}");
    let _ = Duration::ZERO;
}
