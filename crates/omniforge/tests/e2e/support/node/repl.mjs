#!/usr/bin/env node
// E2E driver: the official TypeScript MCP SDK (@modelcontextprotocol/sdk 1.x) as a scripted
// client, the subset of repl.py's line protocol: list, call, changes, wait_changes, quit.
//
//   node repl.mjs stdio '["/path/to/omniforge", "stdio" or "bridge", ...]'
//   node repl.mjs http  http://127.0.0.1:PORT/mcp
//
// Run by crates/omniforge/tests/e2e/script_tools.rs and manifest_tools.rs, which copy this
// file into a temporary directory next to a `node_modules` symlink to .deps/node/node_modules
// (ESM resolves bare specifiers relative to the importing file). Prints `{"event":"ready",...}` after initialize,
// then answers each JSON command line on stdin with one JSON line on stdout. For stdio the
// server's stderr is inherited (it shows up in the driver's stderr).
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

// One request's limit: REPL_TIMEOUT_S seconds (environment; default 60).
const REQUEST_TIMEOUT_MS = Number(process.env.REPL_TIMEOUT_S ?? '60') * 1000;
const out = (payload) => process.stdout.write(`${JSON.stringify(payload)}\n`);
const log = (text) => process.stderr.write(`repl.mjs: ${text}\n`);

async function main(kind, target) {
  let transport;
  if (kind === 'stdio') {
    const [command, ...args] = JSON.parse(target);
    transport = new StdioClientTransport({ command, args, env: { ...process.env, NO_COLOR: '1' }, stderr: 'inherit' });
  } else if (kind === 'http') {
    transport = new StreamableHTTPClientTransport(new URL(target));
  } else {
    throw new Error(`unknown transport ${kind}`);
  }
  let changes = 0;
  let wake = () => {};
  const client = new Client({ name: 'omniforge-e2e-repl-ts', version: '0.0.0' }, { capabilities: {} });
  client.onerror = (error) => log(`client error: ${error?.stack ?? error}`);
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    changes += 1;
    log(`list_changed #${changes}`);
    wake();
  });
  const opts = { timeout: REQUEST_TIMEOUT_MS };
  await client.connect(transport, opts);
  out({ event: 'ready', init: { protocolVersion: transport.protocolVersion ?? null, serverInfo: client.getServerVersion() } });

  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const cmd = JSON.parse(line);
    if (cmd.op === 'quit') {
      out({ ok: true });
      break;
    }
    try {
      if (cmd.op === 'list') {
        const listed = await client.listTools(undefined, opts);
        out({ ok: true, tools: listed.tools });
      } else if (cmd.op === 'call') {
        const started = performance.now();
        const result = await client.callTool({ name: cmd.name, arguments: cmd.args ?? {} }, undefined, opts);
        out({ ok: true, result, elapsed: (performance.now() - started) / 1000 });
      } else if (cmd.op === 'changes') {
        out({ ok: true, count: changes });
      } else if (cmd.op === 'wait_changes') {
        const deadline = performance.now() + (cmd.timeout ?? 20) * 1000;
        while (changes < cmd.count && performance.now() < deadline) {
          await new Promise((resolve) => {
            const timer = setTimeout(resolve, Math.max(0, deadline - performance.now()));
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wake = () => {};
        }
        out(changes >= cmd.count ? { ok: true, count: changes } : { ok: false, error: 'timeout', count: changes });
      } else {
        out({ ok: false, error: `unknown op ${cmd.op}` });
      }
    } catch (error) {
      log(`command ${line} failed: ${error?.stack ?? error}`);
      out({ ok: false, error: `${error?.name ?? 'Error'}: ${error?.message ?? error}` });
    }
  }
  await client.close();
}

const [kind, target] = process.argv.slice(2);
try {
  await main(kind, target);
  process.exit(0);
} catch (error) {
  log(`FAIL: exception: ${error?.stack ?? error}`);
  process.exit(4);
}
