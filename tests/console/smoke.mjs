// Proves the browser test pieces on static pages, with no OmniForge involved: Debian's Chromium
// starts under playwright-core, axe-core runs inside a page with a strict CSP, screenshots are
// written, and each check the driver relies on can fail (a page built to break it does).
//
//   .deps/bin/node22 tests/console/smoke.mjs [--out target/console-screenshots/smoke]
//
// Prints a JSON verdict, then `N passed, N failed`; exit status 1 if any check failed.

import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  launch, versions, openContext, drain, axe, screenshot, overflowsSideways, headerProblems,
  cookieProblems, VIEWPORTS,
} from './browser.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const out = args.includes('--out') ? args[args.indexOf('--out') + 1] : path.join(ROOT, 'target/console-screenshots/smoke');

const STRICT_CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
  "connect-src 'self'", "form-action 'self'", "base-uri 'none'", "frame-ancestors 'none'",
].join('; ');
const GOOD_HEADERS = {
  'content-security-policy': STRICT_CSP,
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
  'referrer-policy': 'same-origin',
};

const CSS = `
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1b1b1b; background: #fff; }
header, main { padding: 1rem 1.5rem; } header { background: #123; color: #fff; }
header a { color: #fff; } label { display: block; font-weight: 600; }
input { font: inherit; padding: .4rem; border: 1px solid #555; max-width: 100%; }
button { font: inherit; padding: .4rem 1rem; background: #0b5394; color: #fff; border: 0; }
.faint { color: #c8c8c8; } .wide { width: 1400px; background: #eee; }
`;

const page = (title, body, extraHead = '') => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title><link rel="stylesheet" href="/app.css">${extraHead}</head><body>${body}</body></html>`;

const PAGES = {
  '/good': [GOOD_HEADERS, page('Good page', `
<header><nav aria-label="Smoke"><a href="/good">Good</a></nav></header>
<main><h1>A page axe finds clean</h1>
<form method="post" action="/good"><label for="q">Search tools</label>
<input id="q" name="q" type="search"><button type="submit">Search</button></form>
<p id="js-state">script from 'self' has not run</p></main>
<script src="/app.js"></script>`)],
  // Images from anywhere are allowed here, so that the driver's own guard meets the request.
  '/bad': [{ ...GOOD_HEADERS, 'x-content-type-options': '', 'content-security-policy': STRICT_CSP.replace("img-src 'self' data:", 'img-src * data:') }, page('Bad page', `
<main><h1>A page built to fail</h1>
<input name="unlabelled" type="text">
<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
<p class="faint">Text with too little contrast.</p>
<p id="inline-state">inline script has not run</p>
<img src="https://third-party.example/pixel.png" alt="tracker">
<script>document.getElementById('inline-state').textContent = 'inline script ran';</script></main>`)],
  '/wide': [GOOD_HEADERS, page('Wide page', '<main><h1>Too wide for a phone</h1><div class="wide">1400 px</div></main>')],
};

const server = http.createServer((req, res) => {
  if (req.url === '/app.css') return send(res, 200, { 'content-type': 'text/css', ...GOOD_HEADERS }, CSS);
  if (req.url === '/app.js') {
    return send(res, 200, { 'content-type': 'text/javascript', ...GOOD_HEADERS },
      "document.getElementById('js-state').textContent = 'script from self ran';");
  }
  const found = PAGES[req.url.split('?')[0]];
  if (!found) return send(res, 404, { 'content-type': 'text/plain' }, 'not found');
  const headers = { 'content-type': 'text/html; charset=utf-8', ...found[0] };
  if (req.url === '/good') headers['set-cookie'] = 'smoke_session=abc; Path=/; HttpOnly; SameSite=Strict';
  return send(res, 200, headers, found[1]);
});
function send(res, status, headers, body) {
  for (const [k, v] of Object.entries(headers)) if (v) res.setHeader(k, v);
  res.writeHead(status);
  res.end(body);
}

const checks = [];
function check(name, ok, detail) {
  checks.push({ name, ok: Boolean(ok), detail });
}

await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const origin = `http://127.0.0.1:${server.address().port}`;
const started = Date.now();
const browser = await launch();
let verdict;
try {
  const { context, watch } = await openContext(browser, origin);
  const tab = await context.newPage();

  // The clean page: headers, cookie, axe, scripts from 'self', screenshots at both widths.
  const good = await tab.goto(`${origin}/good`);
  check('good: security headers', headerProblems(good.headers()).length === 0, headerProblems(good.headers()));
  const cookie = (await context.cookies()).find((c) => c.name === 'smoke_session');
  check('good: cookie HttpOnly and SameSite=Strict', cookieProblems(cookie).length === 0, cookieProblems(cookie));
  const goodAxe = await axe(tab);
  check('good: axe finds no serious or critical violation', goodAxe.blocking === 0, goodAxe.violations);
  check("good: a script from 'self' runs under the CSP",
    (await tab.textContent('#js-state')) === 'script from self ran', await tab.textContent('#js-state'));
  const goodSeen = drain(watch);
  check('good: no CSP violation, page error or foreign request',
    !goodSeen.cspViolations.length && !goodSeen.pageErrors.length && !goodSeen.foreignRequests.length, goodSeen);
  const shots = [await screenshot(tab, out, 'good-desktop')];
  await tab.setViewportSize(VIEWPORTS[1]);
  check('good: no sideways scroll at phone width', !(await overflowsSideways(tab)));
  shots.push(await screenshot(tab, out, 'good-phone'));

  // The page built to fail: each check must notice.
  await tab.setViewportSize(VIEWPORTS[0]);
  const bad = await tab.goto(`${origin}/bad`);
  check('bad: missing nosniff is reported', headerProblems(bad.headers()).includes('no X-Content-Type-Options: nosniff'),
    headerProblems(bad.headers()));
  const badAxe = await axe(tab);
  const ids = badAxe.violations.map((v) => v.id);
  check('bad: axe reports the unlabelled input, the image without alt and the low contrast',
    badAxe.blocking >= 3 && ['label', 'image-alt', 'color-contrast'].every((id) => ids.includes(id)), badAxe.violations);
  check('bad: the inline script was blocked by the CSP',
    (await tab.textContent('#inline-state')) === 'inline script has not run', await tab.textContent('#inline-state'));
  const badSeen = drain(watch);
  check('bad: the CSP violation is reported', badSeen.cspViolations.length >= 1, badSeen.cspViolations);
  check('bad: the third-party request was stopped and reported',
    badSeen.foreignRequests.some((u) => u.includes('third-party.example')), badSeen.foreignRequests);
  shots.push(await screenshot(tab, out, 'bad-desktop'));

  await tab.setViewportSize(VIEWPORTS[1]);
  await tab.goto(`${origin}/wide`);
  check('wide: sideways scroll at phone width is reported', await overflowsSideways(tab));
  await context.close();

  verdict = { ok: checks.every((c) => c.ok), ...versions(browser), seconds: (Date.now() - started) / 1000, screenshots: shots, checks };
} finally {
  await browser.close();
  server.close();
}
console.log(JSON.stringify(verdict, null, 2));
const failed = checks.filter((c) => !c.ok).length;
console.log(`${checks.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
