//! `doctor`, `gc` and `backup`: looking after the machine and the data directory.

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::parts;
use crate::flags::Common;

/// `doctor [--json]`: the sandbox layers, and whether the `--sandbox` level has what it needs.
///
/// # Errors
/// A layer the level needs is missing (after the report is printed).
pub(super) fn doctor(common: &Common, json: bool) -> Result<()> {
    // What this machine provides (detected as `standard` would), judged against the chosen
    // level's requirements: the script crate's policy.
    let level = parts::sandbox_level(common.scripts.sandbox);
    let mut detect = omniforge_script::RunnerConfig::new(omniforge_script::SandboxLevel::Standard);
    detect.host = omniforge_script::HostEnv::from_vars(std::env::vars_os());
    let layers = omniforge_script::doctor(&detect);
    let missing = level.missing_layers(&layers);
    // Whether `serve` would run stored calls on warm templates, and why not.
    let warm_off = if level == omniforge_script::SandboxLevel::Off {
        Some("--sandbox off: a shared template needs the sandbox's layers".to_owned())
    } else {
        omniforge_script::warm_off_reason(&layers, common.scripts.warm_pool)
    };
    if json {
        let out = serde_json::json!({
            "sandbox": level.as_str(),
            "layers": layers.iter().map(|l| serde_json::json!({"name": l.name, "active": l.active, "detail": l.detail})).collect::<Vec<_>>(),
            "missing": missing,
            "warm": {
                "on": warm_off.is_none(),
                "off_reason": warm_off,
                "max_templates": common.scripts.warm_pool,
                "idle_s": common.scripts.warm_idle.as_secs(),
            },
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
        match &warm_off {
            None => out!(
                "{:<17} {:<8} up to {} templates, idle expiry {}",
                "warm-pool",
                "on",
                common.scripts.warm_pool,
                humantime::format_duration(common.scripts.warm_idle)
            ),
            Some(why) => out!("{:<17} {:<8} {why}", "warm-pool", "off"),
        }
        if !missing.is_empty() {
            out!("missing for --sandbox {level}: {}", missing.join(", "));
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
    let layout = omniforge_script::Layout::new(&common.data_dir);
    let removed = omniforge_script::gc(&layout, &in_use).context("removing environments")?;
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
