#!/usr/bin/env node
// E2E driver for client features: the official TypeScript MCP SDK (@modelcontextprotocol/sdk
// 1.x) as a client that answers the server's requests (sampling, elicitation, roots) and
// records what it received. Same command line and line protocol as features_client.py:
//
//   node features_client.mjs http  URL                  FEATURES_JSON
//   node features_client.mjs stdio '["omniforge", ...]' FEATURES_JSON
//
// Run by crates/omniforge/tests/e2e/client_features.rs, which copies this file next to a
// `node_modules` symlink to .deps/node/node_modules (ESM resolves bare specifiers from the file).
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const REQUEST_TIMEOUT_MS = 60_000;
const out = (payload) => process.stdout.write(`${JSON.stringify(payload)}\n`);
const log = (text) => process.stderr.write(`client.mjs: ${text}\n`);

async function main(kind, target, features) {
  let transport;
  if (kind === 'stdio') {
    const [command, ...args] = JSON.parse(target);
    transport = new StdioClientTransport({ command, args, env: { ...process.env, NO_COLOR: '1' }, stderr: 'inherit' });
  } else {
    transport = new StreamableHTTPClientTransport(new URL(target));
  }
  const capabilities = {};
  if ('sampling' in features) capabilities.sampling = {};
  if ('elicitation' in features) capabilities.elicitation = {};
  if ('roots' in features) capabilities.roots = {};
  const client = new Client({ name: 'omniforge-e2e-client-features', version: '0.0.0' }, { capabilities });
  client.onerror = (error) => log(`client error: ${error?.stack ?? error}`);
  let seen = { sampling: [], elicitation: [], roots: 0, logs: [] };
  if ('sampling' in features) {
    client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
      seen.sampling.push(request.params);
      return features.sampling;
    });
  }
  if ('elicitation' in features) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      seen.elicitation.push(request.params);
      return features.elicitation;
    });
  }
  if ('roots' in features) {
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      seen.roots += 1;
      return { roots: features.roots };
    });
  }
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    seen.logs.push(notification.params);
  });
  const opts = { timeout: REQUEST_TIMEOUT_MS };
  await client.connect(transport, opts);
  out({ event: 'ready', init: { protocolVersion: transport.protocolVersion ?? null } });

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
        out({ ok: true, tools: (await client.listTools(undefined, opts)).tools });
      } else if (cmd.op === 'set_level') {
        await client.setLoggingLevel(cmd.level, opts);
        out({ ok: true });
      } else if (cmd.op === 'call') {
        seen = { sampling: [], elicitation: [], roots: 0, logs: [] };
        const progress = [];
        const callOpts = { ...opts };
        if (cmd.progress) {
          callOpts.onprogress = (p) => progress.push({ progress: p.progress, total: p.total ?? null, message: p.message ?? null });
        }
        const result = await client.callTool({ name: cmd.name, arguments: cmd.args ?? {} }, undefined, callOpts);
        await new Promise((resolve) => setTimeout(resolve, 200));
        out({ ok: true, result, progress, ...seen });
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

const [kind, target, features] = process.argv.slice(2);
try {
  await main(kind, target, JSON.parse(features));
  process.exit(0);
} catch (error) {
  log(`FAIL: exception: ${error?.stack ?? error}`);
  process.exit(4);
}
