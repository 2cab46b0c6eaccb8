//! `omniforge audit`: the audit log, newest first.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use omniforge_store::AuditFilter;
use serde_json::json;

use super::{parts, render};
use crate::flags::{AuditArgs, Common};

/// Prints the records `args` select: one line each, or one JSON object per line.
pub(super) async fn run(args: AuditArgs, common: &Common) -> Result<()> {
    let since_ms = args.since.as_deref().map(since).transpose()?;
    if let Some(p) = &args.principal {
        omniforge_server::PrincipalId::parse(p)?;
    }
    let store = parts::open_store(common).await?;
    let records = store
        .audit(&AuditFilter {
            since_ms,
            principal: args.principal,
            object: None,
            before_id: None,
            limit: args.limit,
        })
        .await
        .context("reading the audit log")?;
    for r in records {
        if args.json {
            let line = json!({
                "id": r.id,
                "atMs": r.at_ms,
                "principal": r.principal,
                "action": r.action.as_str(),
                "object": r.object.as_str(),
                "name": r.name,
                "version": r.version,
                "definitionSha256": r.definition_sha256,
                "detail": r.detail,
            });
            out!("{line}");
        } else {
            out!(
                "{}  {:<20} {:<10} {} {}{}{}",
                render::time(r.at_ms),
                r.principal,
                r.action.as_str(),
                r.object.as_str(),
                r.name,
                r.version.map(|v| format!(" v{v}")).unwrap_or_default(),
                r.definition_sha256
                    .map(|h| format!(" sha256:{}", &h[..h.len().min(12)]))
                    .unwrap_or_default(),
            );
        }
    }
    Ok(())
}

/// `--since`: a duration ago (`90m`, `2days`) or an RFC 3339 time, as unix milliseconds.
fn since(text: &str) -> Result<i64> {
    let at = match humantime::parse_duration(text) {
        Ok(ago) => SystemTime::now().checked_sub(ago).unwrap_or(UNIX_EPOCH),
        Err(_) => match humantime::parse_rfc3339_weak(text) {
            Ok(at) => at,
            Err(_) => bail!(
                "--since {text:?}: expected a duration such as 1h or 2days, or a time such as 2026-12-01T10:00:00Z"
            ),
        },
    };
    let ms = at
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis();
    Ok(i64::try_from(ms).unwrap_or(i64::MAX))
}
