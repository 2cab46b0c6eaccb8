#!/usr/bin/env node
// E2E driver: the official TypeScript MCP SDK (@modelcontextprotocol/sdk 1.x) against OmniForge.
//
//   node client.mjs stdio '["/path/to/omniforge", "stdio", ...]'
//   node client.mjs http  http://127.0.0.1:PORT/mcp
//
// Run by crates/omniforge/tests/e2e/clients.rs, which copies this file into a temporary
// directory next to a `node_modules` symlink to .deps/node/node_modules (ESM resolves bare
// specifiers relative to the importing file; NODE_PATH does not apply to ESM).
//
// Same protocol as client.py: INIT, TOOLS, CALL, READY, CHANGED, TOOLS2, DONE lines on stdout,
// diagnostics on stderr. Exit 0 only if every step worked; 2 = a check failed,
// 3 = list_changed did not arrive in time, 4 = an exception.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const STEP_TIMEOUT_MS = 15_000; // one request
const CHANGE_TIMEOUT_MS = 20_000; // list_changed after READY

const out = (tag, payload) =>
  process.stdout.write(payload === undefined ? `${tag}\n` : `${tag} ${JSON.stringify(payload)}\n`);
const log = (text) => process.stderr.write(`driver(ts): ${text}\n`);

class DriverFail extends Error {
  constructor(code, text) {
    super(text);
    this.code = code;
  }
}
const fail = (code, text) => {
  throw new DriverFail(code, text);
};

async function main(kind, target) {
  let transport;
  if (kind === 'stdio') {
    const [command, ...args] = JSON.parse(target);
    transport = new StdioClientTransport({
      command,
      args,
      env: { ...process.env, NO_COLOR: '1' },
      stderr: 'inherit',
    });
  } else if (kind === 'http') {
    transport = new StreamableHTTPClientTransport(new URL(target));
  } else {
    fail(2, `unknown transport ${kind}`);
  }

  let ready = false;
  let beforeReady = 0;
  let onChanged;
  const changed = new Promise((resolve) => {
    onChanged = resolve;
  });
  const client = new Client({ name: 'omniforge-e2e-ts', version: '0.0.0' }, { capabilities: {} });
  client.onerror = (error) => log(`client error: ${error?.stack ?? error}`);
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    if (ready) {
      onChanged();
    } else {
      beforeReady += 1;
      log('list_changed arrived before READY (no catalog change was made yet)');
    }
  });

  const opts = { timeout: STEP_TIMEOUT_MS };
  await client.connect(transport, opts); // initialize + notifications/initialized
  out('INIT', {
    protocolVersion: transport.protocolVersion ?? null,
    serverInfo: client.getServerVersion(),
  });

  const first = await client.listTools(undefined, opts);
  const names = first.tools.map((t) => t.name);
  out('TOOLS', names);
  if (!names.includes('omniforge_instructions')) fail(2, `tools/list lacks omniforge_instructions: ${names}`);

  const call = await client.callTool({ name: 'omniforge_instructions', arguments: {} }, undefined, opts);
  out('CALL', call);
  if (call.isError) fail(2, `omniforge_instructions returned isError: ${JSON.stringify(call)}`);
  const texts = (call.content ?? []).filter((c) => c.type === 'text').map((c) => c.text);
  if (!texts.some((t) => t.includes('OmniForge'))) {
    fail(2, `omniforge_instructions text does not mention OmniForge: ${JSON.stringify(call)}`);
  }

  ready = true;
  out('READY');
  let timer;
  const timedOut = new Promise((resolve) => {
    timer = setTimeout(() => resolve('timeout'), CHANGE_TIMEOUT_MS);
  });
  if ((await Promise.race([changed.then(() => 'changed'), timedOut])) === 'timeout') {
    fail(3, `no notifications/tools/list_changed within ${CHANGE_TIMEOUT_MS / 1000} s after READY (${beforeReady} arrived before READY)`);
  }
  clearTimeout(timer);
  out('CHANGED');

  const second = await client.listTools(undefined, opts);
  out('TOOLS2', second.tools.map((t) => t.name));

  if (kind === 'http') await transport.terminateSession().catch((e) => log(`DELETE session: ${e}`));
  await client.close();
  out('DONE');
}

const [kind, target] = process.argv.slice(2);
try {
  await main(kind, target);
  process.exit(0);
} catch (error) {
  if (error instanceof DriverFail) {
    log(`FAIL: ${error.message}`);
    process.exit(error.code);
  }
  log(`FAIL: exception: ${error?.stack ?? error}`);
  process.exit(4);
}
