#!/usr/bin/env node
// E2E driver: the official TypeScript MCP SDK (@modelcontextprotocol/sdk 1.x) through a load
// balancer in front of replicas: a 2025-x session, or a client of `--stateless` replicas.
//
//   node replica_client.mjs session   LB_URL
//   node replica_client.mjs stateless LB_URL TOOL
//
// Run by crates/omniforge/tests/e2e/replicas.rs (copied next to a node_modules link, see
// util::node_driver). Same protocol as replica_client.py's session mode: SESSION {"id", "version"}
// once initialized; then one command a line on stdin:
//   call -> calls `omniforge_instructions`: OK {"id"} when it worked; when it failed,
//           LOST {"id": old, "status": HTTP status of that session's last POST, "error"}, then a
//           new client initializes a new session and calls again: OK {"id": new} (or FAILED)
//   open -> a new session (the old one is closed): SESSION {...}
//   quit -> exit 0
//
// stateless: the SDK has no 2026-07-28 mode; against `--stateless` replicas it initializes
// (the answer names no session), then every request stands alone and may reach any replica.
// Prints READY {"id": session id or null, "version"}, then calls TOOL one call after the
// other, 20 ms apart (a result must not be an error and must name OmniForge):
//   report -> COUNTS {"ok": n, "failed": m, "errors": [first few]}  (since the last report)
//   quit   -> exit 0
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const TOOL = 'omniforge_instructions';
const STEP_TIMEOUT_MS = 30_000;

const out = (tag, payload) => process.stdout.write(`${tag} ${JSON.stringify(payload)}\n`);
const log = (text) => process.stderr.write(`driver(ts replica): ${text}\n`);

async function open(url) {
  const seen = { status: null };
  const fetchSeen = async (input, init) => {
    const response = await fetch(input, init);
    const method = init?.method ?? 'GET';
    log(`${method} -> ${response.status}`);
    if (method === 'POST') seen.status = response.status;
    return response;
  };
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: fetchSeen });
  const client = new Client({ name: 'omniforge-e2e-ts-replica', version: '0.0.0' }, { capabilities: {} });
  client.onerror = (error) => log(`client error: ${error?.message ?? error}`);
  await client.connect(transport, { timeout: STEP_TIMEOUT_MS });
  return { client, transport, seen, version: transport.protocolVersion };
}

async function call(s, tool = TOOL) {
  const result = await s.client.callTool({ name: tool, arguments: {} }, undefined, { timeout: STEP_TIMEOUT_MS });
  const text = (result.content ?? []).map((c) => c.text ?? '').join('');
  if (result.isError || !text.includes('OmniForge')) {
    throw new Error(`unexpected result: ${JSON.stringify(result).slice(0, 300)}`);
  }
}

async function close(s) {
  // terminateSession would send DELETE to a replica that may be gone: just drop the client.
  try {
    await s.client.close();
  } catch (e) {
    log(`closing: ${e?.message ?? e}`);
  }
}

async function main(url) {
  let s = await open(url);
  out('SESSION', { id: s.transport.sessionId, version: s.version });
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const command = line.trim();
    if (command === 'open') {
      await close(s);
      s = await open(url);
      out('SESSION', { id: s.transport.sessionId, version: s.version });
    } else if (command === 'call') {
      try {
        await call(s);
        out('OK', { id: s.transport.sessionId });
        continue;
      } catch (e) {
        out('LOST', { id: s.transport.sessionId, status: s.seen.status, error: `${e?.name}: ${e?.message}`.slice(0, 300) });
      }
      // The session is gone: initialize a new one, as the spec tells clients to.
      await close(s);
      try {
        s = await open(url);
        await call(s);
        out('OK', { id: s.transport.sessionId });
      } catch (e) {
        out('FAILED', { error: `${e?.name}: ${e?.message}`.slice(0, 300) });
      }
    } else if (command === 'quit') {
      break;
    }
  }
  await close(s);
  process.exit(0);
}

async function stateless(url, tool) {
  const s = await open(url);
  out('READY', { id: s.transport.sessionId ?? null, version: s.version });
  let counts = { ok: 0, failed: 0, errors: [] };
  let done = false;
  const loop = (async () => {
    while (!done) {
      try {
        await call(s, tool);
        counts.ok += 1;
      } catch (e) {
        counts.failed += 1;
        if (counts.errors.length < 5) counts.errors.push(`${e?.name}: ${e?.message}`.slice(0, 300));
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const command = line.trim();
    if (command === 'report') {
      out('COUNTS', counts);
      counts = { ok: 0, failed: 0, errors: [] };
    } else if (command === 'quit') {
      break;
    }
  }
  done = true;
  await loop;
  await close(s);
  process.exit(0);
}

const [kind, url, tool] = process.argv.slice(2);
const usage = kind === 'session' ? !url : kind === 'stateless' ? !url || !tool : true;
if (usage) {
  log('usage: node replica_client.mjs session LB_URL | stateless LB_URL TOOL');
  process.exit(2);
}
(kind === 'session' ? main(url) : stateless(url, tool)).catch((e) => {
  log(`exception: ${e?.stack ?? e}`);
  process.exit(4);
});
