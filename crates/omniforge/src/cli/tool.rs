//! `omniforge tool ...`: stored tools from the command line.

use anyhow::{Context, Result, bail};
use omniforge_server::Caller;

use super::progress::Progress;
use super::{parts, read_json_object, render};
use crate::flags::{Common, ToolCommand};

/// Runs one `tool` subcommand.
pub(super) async fn run(command: ToolCommand, common: &Common) -> Result<()> {
    match command {
        ToolCommand::List { all: true } => {
            // Every tool, disabled ones and ones without a live version included, by name.
            let store = parts::open_store(common).await?;
            for tool in store.tools().await.context("listing tools")? {
                let current = store
                    .get(&tool.name)
                    .await
                    .context("reading the tool")?
                    .map(|t| t.current);
                let state = match (&current, tool.enabled) {
                    (None, _) => "no live version",
                    (Some(_), false) => "disabled",
                    (Some(_), true) => "enabled",
                };
                out!(
                    "{:<40} {:<5} {:<15} {}",
                    tool.name,
                    current
                        .as_ref()
                        .map_or("-".to_owned(), |c| format!("v{}", c.number)),
                    state,
                    current
                        .as_ref()
                        .map_or("", |c| render::first_line(&c.spec.description))
                );
            }
        }
        ToolCommand::List { all: false } => {
            let store = parts::open_store(common).await?;
            for t in store.list_enabled().await.context("listing tools")? {
                out!(
                    "{:<40} v{:<4} {}",
                    t.tool.name,
                    t.current.number,
                    render::first_line(&t.current.spec.description)
                );
            }
        }
        ToolCommand::Show { name } => {
            let store = parts::open_store(common).await?;
            let Some(t) = store.get(&name).await.context("reading the tool")? else {
                bail!("no tool named {name:?}")
            };
            let versions = store.versions(&name).await.context("reading versions")?;
            let view = omniforge_server::describe_tool(&t, &versions);
            out!(
                "{}",
                serde_json::to_string_pretty(&view).unwrap_or_default()
            );
        }
        ToolCommand::History { name } => {
            let store = parts::open_store(common).await?;
            let current = store
                .get(&name)
                .await
                .context("reading the tool")?
                .and_then(|t| t.tool.current_version);
            for v in store.versions(&name).await.context("reading versions")? {
                out!(
                    "{}v{:<4} {:<9} {}  by {:<12} {}",
                    if Some(v.number) == current { "*" } else { " " },
                    v.number,
                    omniforge_server::version_status(&v, current),
                    render::time(v.created_at_ms),
                    v.spec.author,
                    render::first_line(&v.spec.description)
                );
            }
        }
        ToolCommand::Calls { name, limit } => {
            let store = parts::open_store(common).await?;
            let calls = store
                .recent_calls(&name, limit)
                .await
                .context("reading the call log")?;
            for call in &calls {
                let c = omniforge_server::call_json(call);
                let outcome = match &c["exitCode"] {
                    serde_json::Value::Number(n) => format!("exit {n}"),
                    _ => c["outcome"].as_str().unwrap_or("").to_owned(),
                };
                out!(
                    "{}  v{:<4} {:<24} {:>7} ms  {:<9} {}",
                    render::time(call.started_at_ms),
                    call.version.map_or(String::from("-"), |v| v.to_string()),
                    call.principal.as_deref().unwrap_or("-"),
                    call.duration_ms,
                    outcome,
                    call.error.as_deref().unwrap_or("")
                );
            }
        }
        ToolCommand::Enable { name } => {
            let store = parts::open_store(common).await?;
            store
                .set_enabled(&super::actor(), &name, true)
                .await
                .context("enabling")?;
            out!("enabled tool {name}");
        }
        ToolCommand::Disable { name } => {
            let store = parts::open_store(common).await?;
            store
                .set_enabled(&super::actor(), &name, false)
                .await
                .context("disabling")?;
            out!(
                "disabled tool {name} (its history is kept; `omniforge tool enable {name}` brings it back)"
            );
        }
        ToolCommand::Rm { name } => {
            let store = parts::open_store(common).await?;
            store
                .purge(&super::actor(), &name)
                .await
                .context("removing")?;
            out!("removed tool {name} and its history");
        }
        ToolCommand::Rollback {
            name,
            version,
            force,
            ..
        } => {
            let server = parts::one_shot(common).await?;
            let progress = Progress::on_stderr();
            let caller = Caller::local_with_progress(super::principal(), progress.sink());
            let result = server.rollback_tool(&name, version, force, &caller).await;
            progress.finish();
            render::outcome(&result)?;
        }
        ToolCommand::Check { name, version, .. } => {
            let server = parts::one_shot(common).await?;
            let progress = Progress::on_stderr();
            let caller = Caller::local_with_progress(super::principal(), progress.sink());
            let result = server.check_tool(&name, version, &caller).await;
            progress.finish();
            render::outcome(&result)?;
        }
        ToolCommand::Pending => {
            let server = parts::one_shot(common).await?;
            let caller = Caller::local(super::principal());
            render::outcome(&server.pending_tools(&caller).await)?;
        }
        ToolCommand::Approve {
            name,
            version,
            grants,
        } => {
            let server = parts::one_shot(common).await?;
            let caller = Caller::local(super::principal());
            let result = server.approve_tool(&name, version, &grants, &caller).await;
            render::outcome(&result)?;
        }
        ToolCommand::Reject {
            name,
            version,
            reason,
        } => {
            let server = parts::one_shot(common).await?;
            let caller = Caller::local(super::principal());
            let result = server.reject_tool(&name, version, &reason, &caller).await;
            render::outcome(&result)?;
        }
        ToolCommand::Add { file, .. } => {
            let args = read_json_object(&file)?;
            write(common, args, true).await?;
        }
        ToolCommand::Edit { name, file, .. } => {
            let mut args = read_json_object(&file)?;
            args.insert("name".into(), serde_json::Value::String(name));
            write(common, args, false).await?;
        }
        ToolCommand::Run {
            name, arguments, ..
        } => {
            let args = match serde_json::from_str(&arguments).context("parsing the arguments")? {
                serde_json::Value::Object(map) => map,
                _ => bail!("arguments must be a JSON object"),
            };
            let server = parts::one_shot(common).await?;
            let progress = Progress::on_stderr();
            let caller = Caller::local_with_progress(super::principal(), progress.sink());
            let result = server.run_tool(&name, args, &caller).await;
            progress.finish();
            // The run's row is queued: written before the process exits.
            server.flush_call_log().await;
            render::call_result(&result)?;
        }
    }
    Ok(())
}

/// `tool add` (`create`) and `tool edit`: validates, builds the environment with progress on
/// stderr, stores the version.
async fn write(
    common: &Common,
    args: serde_json::Map<String, serde_json::Value>,
    create: bool,
) -> Result<()> {
    let server = parts::one_shot(common).await?;
    let progress = Progress::on_stderr();
    let caller = Caller::local_with_progress(super::principal(), progress.sink());
    let result = server.write_tool(args, &caller, create).await;
    progress.finish();
    render::outcome(&result)
}
