//! `doctor`, `gc` and `backup`: looking after the machine and the data directory.

use std::path::Path;

use anyhow::{Context, Result, bail};
use omniforge_store::ToolStore as _;

use super::parts;
use crate::flags::{Common, SandboxArg};

/// `doctor [--json]`: the sandbox layers, and whether the `--sandbox` level has what it needs.
///
/// # Errors
/// A layer the level needs is missing (after the report is printed).
pub(super) fn doctor(common: &Common, json: bool) -> Result<()> {
    let layers = omniforge_script::doctor();
    let level = common.scripts.sandbox;
    // Which layers each level needs. (Issue 10 moves this policy into omniforge-script.)
    let needed: &[&str] = match level {
        SandboxArg::Strict => &[
            "process-group",
            "rlimits",
            "namespaces",
            "unprivileged-uid",
            "read-only-root",
            "no-network",
        ],
        SandboxArg::Standard | SandboxArg::Off => &["process-group", "rlimits"],
    };
    let missing: Vec<&str> = needed
        .iter()
        .copied()
        .filter(|n| !layers.iter().any(|l| l.name == *n && l.active))
        .collect();
    if json {
        let out = serde_json::json!({
            "sandbox": level.name(),
            "layers": layers.iter().map(|l| serde_json::json!({"name": l.name, "active": l.active, "detail": l.detail})).collect::<Vec<_>>(),
            "missing": missing,
        });
        out!("{out}");
    } else {
        for l in &layers {
            out!(
                "{:<17} {:<8} {}",
                l.name,
                if l.active { "active" } else { "inactive" },
                l.detail
            );
        }
        if !missing.is_empty() {
            out!(
                "missing for --sandbox {}: {}",
                level.name(),
                missing.join(", ")
            );
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        bail!(
            "the sandbox level needs layers this machine lacks: {}",
            missing.join(", ")
        )
    }
}

/// `gc`: removes the environments no tool version uses.
pub(super) async fn gc(common: &Common) -> Result<()> {
    let store = parts::open_store(common).await?;
    let in_use = store
        .env_ids_in_use()
        .await
        .context("reading the environments in use")?;
    let removed = omniforge_script::gc(&common.data_dir.join("envs"), &in_use)
        .context("removing environments")?;
    out!("removed {} unused environment(s)", removed.len());
    Ok(())
}

/// `backup FILE`: a consistent copy of the tool database.
pub(super) async fn backup(common: &Common, file: &Path) -> Result<()> {
    let store = parts::open_store(common).await?;
    store
        .backup(file)
        .await
        .with_context(|| format!("backing up to {}", file.display()))?;
    out!("backed up the tool database to {}", file.display());
    Ok(())
}
