// TypeScript SDK peer of OmniForge's benchmarks: the official @modelcontextprotocol/sdk server
// (McpServer), as the SDK's own examples run it (Express app from createMcpExpressApp,
// StreamableHTTPServerTransport; a transport per session, or a server per request when stateless).
//
//   node22 ts_server.mjs stdio --text-file GUIDE.txt
//   node22 ts_server.mjs http  --text-file GUIDE.txt --port PORT [--stateless]
//
// MCP_SDK_DIR (default: <repo>/.deps/node/node_modules/@modelcontextprotocol/sdk) is where the
// SDK is installed; scripts/bootstrap puts it there.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const sdk = process.env.MCP_SDK_DIR ?? resolve(here, '../../.deps/node/node_modules/@modelcontextprotocol/sdk');
const load = (p) => import(pathToFileURL(resolve(sdk, 'dist/esm', p)).href);
const { McpServer } = await load('server/mcp.js');
const { StreamableHTTPServerTransport } = await load('server/streamableHttp.js');
const { StdioServerTransport } = await load('server/stdio.js');
const { createMcpExpressApp } = await load('server/express.js');
const { isInitializeRequest } = await load('types.js');

const argv = process.argv.slice(2);
const mode = argv[0];
const opt = (name) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : undefined; };
const text = readFileSync(opt('--text-file'), 'utf8');
const port = Number(opt('--port') ?? 8000);
const stateless = argv.includes('--stateless');

function makeServer() {
  const server = new McpServer({ name: 'ts-sdk-bench', version: '0.1.0' });
  server.registerTool('omniforge_instructions', {
    description: 'A constant text (benchmark tool).',
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  }, async () => ({ content: [{ type: 'text', text }] }));
  return server;
}

if (mode === 'stdio') {
  await makeServer().connect(new StdioServerTransport());
} else if (stateless) {
  const app = createMcpExpressApp({ host: '127.0.0.1' });
  app.post('/mcp', async (req, res) => {
    const server = makeServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  app.listen(port, '127.0.0.1');
} else {
  const app = createMcpExpressApp({ host: '127.0.0.1' });
  const transports = new Map();
  app.post('/mcp', async (req, res) => {
    const sid = req.headers['mcp-session-id'];
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid || !isInitializeRequest(req.body)) {
        res.status(sid ? 404 : 400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad session' }, id: null });
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => { transports.set(id, transport); },
      });
      transport.onclose = () => { if (transport.sessionId) transports.delete(transport.sessionId); };
      await makeServer().connect(transport);
    }
    await transport.handleRequest(req, res, req.body);
  });
  const bySession = async (req, res) => {
    const transport = transports.get(req.headers['mcp-session-id']);
    if (!transport) { res.status(404).end(); return; }
    await transport.handleRequest(req, res);
  };
  app.get('/mcp', bySession);
  app.delete('/mcp', bySession);
  app.listen(port, '127.0.0.1');
}
