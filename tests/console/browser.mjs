// The browser side of the console tests: Debian's Chromium driven by playwright-core, axe-core
// injected into each page, screenshots, and the checks every console page must pass whatever it
// shows (security headers, no CSP violation, no request leaving the server, no sideways scroll on
// a phone). Used by driver.mjs (against a real `omniforge serve`) and smoke.mjs (a static page).
//
// Nothing here downloads a browser: playwright-core launches the executable it is given.

import { readFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);

/** Debian's Chromium, unless OMNIFORGE_CHROMIUM names another build. */
export const CHROMIUM = process.env.OMNIFORGE_CHROMIUM || '/usr/bin/chromium';

/** The widths every page is looked at: a laptop and a phone. */
export const VIEWPORTS = [
  { name: 'desktop', width: 1280, height: 900 },
  { name: 'phone', width: 390, height: 844 },
];

/** axe-core's impacts that fail a page (the issue: zero serious or critical violations). */
const BLOCKING_IMPACTS = new Set(['serious', 'critical']);

/** axe-core's own bundle, evaluated in the page (not a <script> tag, which the page's CSP blocks). */
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const AXE_VERSION = JSON.parse(
  readFileSync(path.join(path.dirname(require.resolve('axe-core/axe.min.js')), 'package.json'), 'utf8'),
).version;

/**
 * Starts headless Chromium. The flags keep it off the network (this machine reaches only the
 * package registries; Chromium's background services would try Google's hosts at every start).
 */
export async function launch() {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
  return browser;
}

/** What the run used, for the verdict. */
export function versions(browser) {
  return {
    chromium: browser.version(),
    executable: CHROMIUM,
    playwrightCore: require('playwright-core/package.json').version,
    axeCore: AXE_VERSION,
    node: process.version,
  };
}

/**
 * A fresh browser context for `origin` with the page watchers every check needs: CSP violations
 * and script errors reported by the page, and every request that leaves `origin` (aborted, and
 * recorded: pages must work without third-party network access).
 */
export async function openContext(browser, origin, { viewport = VIEWPORTS[0] } = {}) {
  const context = await browser.newContext({
    viewport: { width: viewport.width, height: viewport.height },
    // Never bypass the page's CSP: the tests must see what a user's browser enforces.
    bypassCSP: false,
    javaScriptEnabled: true,
  });
  const watch = { cspViolations: [], pageErrors: [], foreignRequests: [] };
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('data:') || new URL(url).origin === origin) return route.continue();
    watch.foreignRequests.push(url);
    return route.abort('blockedbyclient');
  });
  context.on('page', (page) => attachWatchers(page, watch));
  return { context, watch };
}

function attachWatchers(page, watch) {
  page.on('console', (msg) => {
    const text = msg.text();
    if (/Content[- ]Security[- ]Policy/i.test(text)) watch.cspViolations.push(text);
  });
  page.on('pageerror', (error) => watch.pageErrors.push(String(error)));
}

/** Takes what the watchers saw since the last call, and clears it. */
export function drain(watch) {
  const seen = {
    cspViolations: watch.cspViolations.splice(0),
    pageErrors: watch.pageErrors.splice(0),
    foreignRequests: watch.foreignRequests.splice(0),
  };
  return seen;
}

/**
 * Runs axe-core on the page. Returns every violation (id, impact, help, up to 5 targets) and
 * the number of blocking ones (serious or critical).
 */
export async function axe(page) {
  // Evaluated through the DevTools protocol, which the page's CSP does not govern, so the
  // page's real policy stays in force for everything else.
  const loaded = await page.evaluate(() => typeof window.axe === 'object');
  if (!loaded) await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate(async () => {
    const r = await window.axe.run(document, {
      resultTypes: ['violations'],
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] },
    });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.slice(0, 5).map((n) => n.target.join(' ')),
    }));
  });
  const blocking = result.filter((v) => BLOCKING_IMPACTS.has(v.impact)).length;
  return { violations: result, blocking };
}

/**
 * A PNG of `target` (a page, whole by default, or a locator) under `dir`; returns its path.
 */
export async function screenshot(target, dir, name, { fullPage = true } = {}) {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name.replace(/[^a-zA-Z0-9_.-]+/g, '-')}.png`);
  const isPage = typeof target.goto === 'function';
  await target.screenshot(isPage ? { path: file, fullPage } : { path: file });
  return file;
}

/** Whether the page scrolls sideways at its current width (unusable on a phone). */
export async function overflowsSideways(page) {
  return page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
}

/**
 * The response headers every console page must carry, as a list of problems (empty: fine).
 * `tls` says whether the page was served over HTTPS (HSTS and Secure cookies are then due).
 */
export function headerProblems(headers, { tls = false } = {}) {
  const problems = [];
  const csp = parseCsp(headers['content-security-policy'] || '');
  if (!headers['content-security-policy']) problems.push('no Content-Security-Policy');
  const scripts = csp['script-src'] || csp['default-src'];
  if (!scripts) problems.push('CSP: no script-src or default-src');
  else if (scripts.some((s) => ["'unsafe-inline'", "'unsafe-eval'", '*', 'data:', 'http:', 'https:'].includes(s)))
    problems.push(`CSP: script-src allows ${scripts.join(' ')}`);
  if ((csp['frame-ancestors'] || []).join(' ') !== "'none'") problems.push("CSP: frame-ancestors is not 'none'");
  if (!csp['object-src'] && (csp['default-src'] || []).join(' ') !== "'none'") problems.push('CSP: object-src not restricted');
  if (!csp['base-uri']) problems.push('CSP: no base-uri');
  if (!csp['form-action']) problems.push('CSP: no form-action');
  if ((headers['x-content-type-options'] || '').toLowerCase() !== 'nosniff') problems.push('no X-Content-Type-Options: nosniff');
  if (!/no-store/.test(headers['cache-control'] || '')) problems.push('Cache-Control lacks no-store');
  if (tls && !headers['strict-transport-security']) problems.push('no Strict-Transport-Security over TLS');
  return problems;
}

/** `default-src 'none'; img-src 'self' data:` → { 'default-src': ["'none'"], 'img-src': ["'self'", 'data:'] } */
export function parseCsp(text) {
  const out = {};
  for (const part of text.split(';')) {
    const [name, ...values] = part.trim().split(/\s+/);
    if (name) out[name.toLowerCase()] = values;
  }
  return out;
}

/** Problems with the session cookie (empty: fine). */
export function cookieProblems(cookie, { tls = false } = {}) {
  if (!cookie) return ['no session cookie'];
  const problems = [];
  if (!cookie.httpOnly) problems.push('session cookie is not HttpOnly');
  if (cookie.sameSite !== 'Strict') problems.push(`session cookie is SameSite=${cookie.sameSite}, not Strict`);
  if (tls && !cookie.secure) problems.push('session cookie is not Secure over TLS');
  return problems;
}
