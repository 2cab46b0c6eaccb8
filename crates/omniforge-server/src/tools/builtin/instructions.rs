//! `omniforge_instructions`: how to use and extend this server; and the server-level
//! `instructions` of the InitializeResult.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::auth::Scope;
use crate::catalog::call::{Call, CallFuture, ToolCall, ready};
use crate::catalog::entry::Entry;
use crate::tools::ops::mcp::{builtin, render};
use crate::tools::ops::{Hints, Outcome, ToolDef};

/// Name of the built-in that explains how to use this server.
pub(crate) const INSTRUCTIONS: &str = "omniforge_instructions";

/// The server-level `instructions` sent in the InitializeResult.
pub(crate) const SERVER_INSTRUCTIONS: &str = "OmniForge hosts tools for AI agents. Its tools come from \
three sources, listed in this order: built-in tools (names start with `omniforge_`), manifest \
tools (RPCs of a Connect service configured by the operator) and stored tools (forged by agents \
and kept in OmniForge's database). Call `omniforge_instructions` for how to use and extend it.";

/// The server-level `instructions` of `omniforge bridge`, which serves one manifest only.
pub(crate) const BRIDGE_INSTRUCTIONS: &str = "OmniForge bridge: each tool is an RPC of a forge manifest, \
proxied to its running Connect service. Arguments are the RPC's request message as JSON; a \
Connect error comes back as an isError result naming its code (e.g. `not_found: ...`).";

/// The text `omniforge_instructions` answers with.
const GUIDE: &str = "\
# OmniForge

OmniForge is an MCP server whose tool list can grow while you work.

## Tool sources (tools/list order)
1. Built-in tools: names start with `omniforge_`. They are always present.
2. Manifest tools: RPCs declared in a forge manifest (gen/mcp/manifest.json) that the operator
   configured; each call is proxied to the running Connect service.
3. Stored tools: tools forged by agents with omniforge_create_tool, kept in OmniForge's database,
   newest first.
When two sources offer the same name, the earlier source wins.

## Finding tools
Search before you forge: `omniforge_search_tools {query, limit?, detail?}` ranks the tools you
may call by what they do (or finds one by its exact name), one line each;
`omniforge_get_tool_schemas {names}` gives their full schemas. A tool a colleague forged is
found the moment it exists.

## Calling tools
- `arguments` must be a JSON object matching the tool's `inputSchema`; leave it out for `{}`.
- Problems with a call (unknown tool, arguments that do not match) come back as a normal result
  with `isError: true` and a text that says what is wrong, so you can correct the call.
- The tool list can change during a session. The server sends
  `notifications/tools/list_changed`; call tools/list again when you receive it. If your client
  cannot see new tools, call them with `omniforge_call_tool {name, arguments}`.

## Forging a tool
`omniforge_create_tool {name, description, code, inputSchema?, outputSchema?, title?,
dependencies?, annotations?, timeout_s?, network?, secrets?, examples?}` stores version 1 of a
Python tool;
`omniforge_update_tool` (same fields) adds a version; `omniforge_test_tool {code, arguments?,
dependencies?}` runs code once without saving; `omniforge_get_tool`, `omniforge_rollback_tool`
and `omniforge_delete_tool` (`purge: true` removes the history) manage what exists.
- name: letters, digits, `_` and `-`, at most 64 characters; not a built-in or manifest name.
- Arguments arrive as JSON on stdin: `args = json.load(sys.stdin)`, or
  `import omniforge; args = omniforge.args()`.
- Return text by printing it. With an `outputSchema`, print exactly one JSON object matching it:
  it becomes `structuredContent`. A failing script (non-zero exit, timeout) is an error result
  showing stdout, `[stderr] ...`, `[exit N]` or `[timeout]`.
- Dependencies: PEP 508 strings (`\"python-dateutil>=2.9\"`), or a PEP 723 `# /// script` block
  in the code. They are resolved and installed (wheels only) when the tool is created, never at
  call time; the script has no network unless `network: true`.
- Limits: `timeout_s` (default 30 s), memory, output size; scripts run in a sandbox that sees
  only their environment and a private /tmp.
- Examples: give every tool `examples`, a few calls with what they must return. They run in
  the sandbox before a version goes live; if one fails, the version is refused with each
  failing example's expected and actual result (`keepFailedDrafts: true` keeps it as a draft,
  never current). Each is `{\"arguments\": {...}, \"expect\": {...}}`; `expect` holds one or more
  of `text` (the exact result text), `contains` (a substring), `structured` (the exact
  `structuredContent`) or `structuredSchema` (a JSON Schema it matches), `isError` (default
  false). Example runs get no secrets, not even granted ones. An update without `examples`
  keeps the current ones; `omniforge_check_tool {name, version?}` runs them again;
  `omniforge_rollback_tool` runs the target version's first (`force: true` skips them).
- Secrets: `secrets: [\"API_KEY\"]` requests stored secrets as environment variables
  (`os.environ[\"API_KEY\"]`); their exact values are redacted from results. A version gets
  one only once an `admin` granted it to that exact version (`omniforge_grant_secret`; a
  version an admin writes is granted the declared secrets that exist); a new version asks
  again, and test runs get none. An `admin` stores them with `omniforge_set_secret {name,
  value}` (`omniforge_list_secrets`, `omniforge_delete_secret`,
  `omniforge_list_secret_requests`, `omniforge_revoke_secret`).
- Approval: a server run with `--require-approval` keeps a version written without the `admin`
  scope **pending** (after its examples pass): you see and can call it at once, without
  secrets; everyone else keeps the current version until an admin approves it
  (`omniforge_approve_tool {name, version, grants?}`, which grants only the secrets named) or
  rejects it (`omniforge_reject_tool {name, version, reason}`). `omniforge_list_pending_tools`
  lists yours (an admin's: all).
- The helper module: `import omniforge`; `omniforge.progress(done, total, message)` reports
  progress to the caller, `omniforge.log(level, data)` logs (sent when at or above the
  client's logging/setLevel, default info), `omniforge.result(content=[...],
  structured={...})` sets the result instead of stdout.
- Rich content: `omniforge.text(s)`, `omniforge.image(data, \"image/png\")`,
  `omniforge.audio(data, \"audio/wav\")` (bytes or base64 text), `omniforge.resource(uri,
  text=... | blob=..., mime_type=...)` (embedded), `omniforge.resource_link(uri, name, ...)`;
  pass a list of them as `content=`. An invalid item makes the call an error result.
- Asking the client (when it declared the capability):
  `omniforge.sample(prompt_or_messages, max_tokens=...)` (sampling/createMessage, returns
  {role, content, model, stopReason}), `omniforge.elicit(message, requested_schema)`
  (elicitation/create, form mode, returns {action, content}), `omniforge.roots()` (list of
  {uri, name}). Each takes `timeout=` seconds and `key=` (the question's name, default q1, q2,
  ... in asking order) and raises `omniforge.RequestError` with a clear message when refused.
  `omniforge.ask({\"name\": omniforge.elicit_request(msg, schema), \"greeting\":
  omniforge.sample_request(prompt), \"where\": omniforge.roots_request()})` asks several in one
  round and returns {key: answer}. At most 8 may wait for the client at once.
- Under protocol 2026-07-28 a question ends the call with an input-required result (the keys
  name the questions); the client retries with the answers and the SCRIPT RUNS AGAIN FROM THE
  START, each question answered from them. Ask before doing anything with side effects, and
  never put secret values in a question. Example:
    import omniforge
    a = omniforge.elicit(\"Delete which file?\", {\"type\": \"object\", \"properties\":
        {\"file\": {\"type\": \"string\"}}, \"required\": [\"file\"]}, key=\"file\")
    if a[\"action\"] == \"accept\": ...  # act only after every question

Example (`add_vat`):
    code: import json, sys
          from decimal import Decimal
          a = json.load(sys.stdin); net = Decimal(str(a[\"net\"])); vat = net * Decimal(\"0.2\")
          print(json.dumps({\"net\": str(a[\"net\"]), \"vat\": str(vat.quantize(Decimal(\"0.01\")))}))
    inputSchema: {\"type\": \"object\", \"properties\": {\"net\": {\"type\": \"number\"}}, \"required\": [\"net\"]}
    examples: [{\"arguments\": {\"net\": 10}, \"expect\": {\"contains\": \"2.00\"}},
               {\"arguments\": {\"net\": 0}, \"expect\": {\"text\": \"{\\\"net\\\": \\\"0\\\", \\\"vat\\\": \\\"0.00\\\"}\"}}]

## Long-running tools (tasks)
Clients give up on a request after about a minute. For longer work give the tool
`taskSupport: \"optional\"` (or `\"required\"`: only clients of the MCP Tasks extension may call
it) and a `timeout_s` as long as the work. A client that declares the extension then gets a task
at once and polls `tasks/get` until it is `completed` (the result inlined) or `failed` (the
script's time limit, a signal, `omniforge.protocol_error`, its server stopped); `tasks/cancel`
kills the script. Inside a task `omniforge.elicit`, `sample`, `roots` and `ask` wait for the
user: the task reads `input_required` with the questions (by `key=`) until the client answers
with `tasks/update`, then the script goes on. Example: code
`a = omniforge.elicit(\"Delete it?\", {\"type\": \"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"}}}, key=\"ok\")`
then the work, with `taskSupport: \"optional\"`, `timeout_s: 3600`. To ask before the task exists,
add `taskStart: \"script\"`: the call is an ordinary request (its questions are input-required
rounds, replayed: ask before side effects) until the script calls `omniforge.start_task()`; then
the client gets the task and the rest of the script runs as it. Without the extension (or with
`taskStart: \"call\"`) `start_task()` does nothing. Example: code
`n = omniforge.elicit(\"Name?\", {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}}}, key=\"name\")`,
`omniforge.start_task()`, then the work.

## Resources and prompts
`omniforge_create_resource {uri, name, text | blob (base64), mimeType?, title?, description?}`
stores a resource (resources/list, resources/read; subscribers are told when it changes).
`omniforge_create_resource_template {uriTemplate, name, text | code, mimeType?, completions?,
completion_code?, dependencies?}`: resources/read of a matching URI (e.g. `docs://pages/{id}`)
answers with `text` where each `{id}` is replaced, or with what `code` prints (it reads the
variables as JSON on stdin). `omniforge_create_prompt {name, messages | code, arguments?,
description?}`: messages are MCP PromptMessages (`content` may be a plain string) with
`{argument}` placeholders; arguments are `{name, description?, required?, values?}` (values feed
completion/complete). A prompt's `code` reads the given arguments as JSON on stdin and prints
the messages (a JSON array of PromptMessages, or plain text for one user message); like a
template's code it may ask the user (`omniforge.elicit(..., key=...)`): under protocol
2026-07-28 `prompts/get` then answers `input_required` and the script re-runs with the answers,
so ask before any side effect. Example code: `import omniforge` then
`c = omniforge.elicit(\"Context?\", {\"type\": \"object\", \"properties\": {\"c\": {\"type\": \"string\"}}}, key=\"c\")`
then `print(\"Use this context: \" + c[\"content\"][\"c\"])`.
The `_update_` variants change only the fields given; `_delete_` removes; `omniforge_get_definition`
shows what is stored.
";

/// The arguments of `omniforge_instructions`: none.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InstructionsArgs {}

/// How it is listed.
const TOOL: ToolDef = ToolDef {
    name: INSTRUCTIONS,
    title: Some("OmniForge instructions"),
    description: "How to use this OmniForge server: its tool sources, how calls and errors work, \
                  and how to forge new tools. Takes no arguments.",
    scope: Scope::Call,
    hints: Hints::READ,
};

/// The `omniforge_instructions` built-in: answered at once (the inputSchema admits no
/// arguments, so there is nothing to parse).
pub(crate) struct Instructions;

impl ToolCall for Instructions {
    fn call<'a>(&'a self, _call: Call<'a>) -> CallFuture<'a> {
        ready(Ok(render(Outcome::done(GUIDE))))
    }
}

/// Its catalog entry.
pub(crate) fn entry() -> Entry {
    builtin::<InstructionsArgs>(&TOOL, Arc::new(Instructions))
}
