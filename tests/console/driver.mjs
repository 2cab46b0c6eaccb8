// The console's browser test driver (issue 17). A Rust e2e test starts `omniforge serve`, does the
// MCP side itself (create a tool, update it, listen for list_changed), and runs this driver for
// the browser side:
//
//   OMNIFORGE_CONSOLE_TOKEN=... .deps/bin/node22 tests/console/driver.mjs --url http://127.0.0.1:PORT \
//       [--out target/console-screenshots] [--steps '[{"do":"signIn"},{"do":"tour"}]']
//
// Tokens come from the environment, never the command line: a step names the variable
// (`tokenEnv`, default OMNIFORGE_CONSOLE_TOKEN). Steps run in order in one browser context:
//
//   signIn        {tokenEnv?}            sign in through the form; the cookie is HttpOnly,
//                                        SameSite=Strict (Secure over TLS) and not the one the
//                                        sign-in form was served with
//   signInRefused {tokenEnv?}            a wrong token gets 401, an alert and no session
//   tour          {maxTools?}            every page in the navigation, every tool page it lists
//                                        (up to maxTools, default 10) and one call detail
//   findTool      {name}                 search the catalog and find the tool's link
//   diff          {tool, from, to}       choose two versions, show the diff, count changed lines
//   tryIt         {tool, arguments, contains?, images?, shoot?}  fill the generated form, run,
//                                        read the result (contains: a string or a list; images:
//                                        how many <img> the result shows; shoot: the result's
//                                        screenshot for the docs, by that name)
//   rollback      {tool, version}        roll back; the version becomes current
//   approve       {tool, version, grants?}     review a pending version, tick grants, approve
//   reject        {tool, version, reason}      reject with a reason
//   readOnly      {tool}                 no edit controls for this user, and a forged change
//                                        (valid CSRF token, right Origin) is still refused
//   csrfRefused   {tool}                 a change whose form lost its CSRF token gets 403 and
//                                        changes nothing
//   originRefused {tool}                 a change from another Origin, or without one, gets 403
//   mcpRefusesCookie {path?}             /mcp with the console cookie and no bearer token: 401
//   signOut       {}                     the session ends; the old cookie opens nothing
//   shoot         {path, name, width?, height?, selector?}
//                                        a viewport-sized (or one element's) screenshot for the
//                                        docs, written to --curated DIR (default OUT/curated)
//
// Every page a step loads is inspected: status, security headers, axe-core (zero serious or
// critical violations, at 1280 px and at 390 px), CSP violations, script errors, requests
// leaving the server, agent text turned into markup (inline scripts, on* attributes, SVG or
// foreign images), sideways scroll at phone width; and screenshotted at both widths.
//
// Output: one JSON verdict on stdout, then `N passed, N failed` (one per step). Exit status 0
// when every step passed, 1 when one failed, 2 for bad usage.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  launch, versions, openContext, drain, axe, screenshot, overflowsSideways, headerProblems,
  cookieProblems, VIEWPORTS,
} from './browser.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const USAGE = 'usage: driver.mjs --url URL [--out DIR] [--curated DIR] [--steps JSON]  (token in $OMNIFORGE_CONSOLE_TOKEN)';

function parseArgs(argv) {
  const opts = { out: path.join(ROOT, 'target/console-screenshots'), steps: [{ do: 'signIn' }, { do: 'tour' }] };
  for (let i = 0; i < argv.length; i++) {
    const value = argv[i + 1];
    switch (argv[i]) {
      case '--url': opts.url = value; i++; break;
      case '--out': opts.out = path.resolve(value); i++; break;
      case '--steps': opts.steps = JSON.parse(value); i++; break;
      case '--curated': opts.curated = path.resolve(value); i++; break;
      default: throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  if (!opts.url) throw new Error('--url is required');
  opts.curated ??= path.join(opts.out, 'curated');
  opts.origin = new URL(opts.url).origin;
  if (!Array.isArray(opts.steps) || !opts.steps.every((s) => s && typeof s.do === 'string')) {
    throw new Error('--steps must be a JSON array of {"do": NAME, ...}');
  }
  return opts;
}

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (error) {
  console.error(`driver: ${error.message}\n${USAGE}`);
  process.exit(2);
}
const TLS = opts.origin.startsWith('https:');
const COOKIE = TLS ? '__Host-omniforge_console' : 'omniforge_console';

function token(step) {
  const name = step.tokenEnv || 'OMNIFORGE_CONSOLE_TOKEN';
  const value = process.env[name];
  if (!value) throw new Error(`$${name} is not set`);
  return value;
}

const slug = (s) => s.replace(/^\/console\/?/, '').replace(/[^a-zA-Z0-9]+/g, '-').replace(/^-|-$/g, '') || 'index';
const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Agent text that became markup, or images that are not same-origin or raster data. */
async function markupProblems(page, origin) {
  return page.evaluate((origin) => {
    const problems = [];
    const inline = document.querySelectorAll('script:not([src])').length;
    if (inline) problems.push(`${inline} inline <script> element(s)`);
    for (const el of document.querySelectorAll('*')) {
      for (const attr of el.getAttributeNames()) {
        if (/^on/i.test(attr)) problems.push(`<${el.localName} ${attr}> event handler attribute`);
      }
    }
    for (const el of document.querySelectorAll('iframe, object, embed, frame')) problems.push(`<${el.localName}> element`);
    for (const img of document.querySelectorAll('img')) {
      const src = img.getAttribute('src') || '';
      const raster = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]+$/.test(src);
      if (!raster && new URL(src, location.href).origin !== origin) problems.push(`image not allowed: ${src.slice(0, 60)}`);
    }
    if (document.body && document.body.dataset.xss) problems.push('agent-written script ran (data-xss set)');
    return problems;
  }, origin);
}

/**
 * Inspects the page the last navigation loaded (`response`), adds what is wrong to `problems`,
 * and returns a record with screenshots at both widths.
 */
async function inspect(ctx, name, response, { expectStatus = 200 } = {}) {
  const { page, watch, problems } = ctx;
  const record = { name, path: new URL(page.url()).pathname };
  const fail = (what) => problems.push(`${record.path}: ${what}`);
  if (response) {
    record.status = response.status();
    if (record.status !== expectStatus) fail(`status ${record.status}, expected ${expectStatus}`);
    for (const p of headerProblems(response.headers(), { tls: TLS })) fail(p);
  }
  await page.waitForLoadState('load');
  record.axe = {};
  record.screenshots = [];
  for (const viewport of VIEWPORTS) {
    await page.setViewportSize({ width: viewport.width, height: viewport.height });
    const result = await axe(page);
    record.axe[viewport.name] = result;
    if (result.blocking) fail(`axe at ${viewport.width} px: ${result.violations.filter((v) => ['serious', 'critical'].includes(v.impact)).map((v) => `${v.id} (${v.impact}) at ${v.targets.join(', ')}`).join('; ')}`);
    if (viewport.name === 'phone' && (await overflowsSideways(page))) fail(`scrolls sideways at ${viewport.width} px`);
    record.screenshots.push(await screenshot(page, opts.out, `${String(ctx.counter++).padStart(2, '0')}-${name}-${viewport.name}`));
  }
  await page.setViewportSize({ width: VIEWPORTS[0].width, height: VIEWPORTS[0].height });
  for (const p of await markupProblems(page, opts.origin)) fail(p);
  const seen = drain(watch);
  for (const v of seen.cspViolations) fail(`CSP violation: ${v}`);
  for (const e of seen.pageErrors) fail(`script error: ${e}`);
  for (const r of seen.foreignRequests) fail(`request left the server: ${r}`);
  ctx.pages.push(record);
  return record;
}

async function sessionCookie(ctx) {
  return (await ctx.context.cookies(`${opts.origin}/console/`)).find((c) => c.name === COOKIE);
}

/** The CSRF token the page's forms carry (the sign-out form is on every signed-in page). */
async function csrfOf(page) {
  return page.locator('input[name="csrf"]').first().getAttribute('value');
}

const steps = {
  async signIn(ctx, step) {
    const { page, problems } = ctx;
    const response = await page.goto(`${opts.origin}/console/sign-in`);
    await inspect(ctx, 'sign-in', response);
    const before = await sessionCookie(ctx);
    if (!before) problems.push('the sign-in form came without a session cookie (its CSRF token has nothing to bind to)');
    await page.getByLabel('Token', { exact: true }).fill(token(step));
    await Promise.all([page.waitForURL((u) => !u.pathname.endsWith('/sign-in')), page.getByRole('button', { name: 'Sign in', exact: true }).click()]);
    const after = await sessionCookie(ctx);
    problems.push(...cookieProblems(after, { tls: TLS }));
    if (before && after && before.value === after.value) problems.push('the session id did not change at sign-in');
    if (!(await page.getByRole('button', { name: 'Sign out', exact: true }).count())) problems.push('no Sign out button after signing in');
    return { landed: new URL(page.url()).pathname };
  },

  async signInRefused(ctx, step) {
    const { page, problems } = ctx;
    await page.goto(`${opts.origin}/console/sign-in`);
    await page.getByLabel('Token', { exact: true }).fill(`${token(step)}-wrong`);
    const [response] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), page.getByRole('button', { name: 'Sign in', exact: true }).click()]);
    await inspect(ctx, 'sign-in-refused', response, { expectStatus: 401 });
    if (!(await page.getByRole('alert').count())) problems.push('no alert says why the sign-in failed');
    const probe = await page.request.get(`${opts.origin}/console/tools`, { maxRedirects: 0 });
    if (probe.status() === 200) problems.push('a refused sign-in still opened the catalog');
    return {};
  },

  async tour(ctx, step) {
    const { page } = ctx;
    const maxTools = step.maxTools ?? 10;
    await page.goto(`${opts.origin}/console/tools`);
    const navHrefs = await page.locator('nav[aria-label="Console"] a').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
    const visited = [];
    for (const href of navHrefs) {
      const response = await page.goto(`${opts.origin}${href}`);
      await inspect(ctx, slug(href), response);
      visited.push(href);
    }
    await page.goto(`${opts.origin}/console/tools`);
    const toolHrefs = (await page.locator('main table a[href^="/console/tools/"]').evaluateAll((as) => as.map((a) => a.getAttribute('href')))).slice(0, maxTools);
    let callHref;
    for (const href of toolHrefs) {
      const response = await page.goto(`${opts.origin}${href}`);
      await inspect(ctx, slug(href), response);
      visited.push(href);
      callHref ??= await page.locator('a[href*="/calls/"]').first().getAttribute('href', { timeout: 1000 }).catch(() => undefined);
    }
    if (callHref) {
      const response = await page.goto(`${opts.origin}${callHref}`);
      await inspect(ctx, 'call', response);
      visited.push(callHref);
    }
    return { visited };
  },

  async findTool(ctx, step) {
    const { page, problems } = ctx;
    const response = await page.goto(`${opts.origin}/console/tools`);
    await page.getByLabel('Search tools').fill(step.name);
    await page.getByLabel('Search tools').press('Enter');
    const link = page.locator('main table').getByRole('link', { name: step.name, exact: true });
    await link.waitFor({ timeout: 10000 }).catch(() => problems.push(`tool ${step.name} not found in the catalog`));
    await inspect(ctx, `catalog-search-${step.name}`, response);
    return { found: (await link.count()) > 0 };
  },

  async diff(ctx, step) {
    const { page, problems } = ctx;
    const response = await page.goto(`${opts.origin}/console/tools/${step.tool}`);
    await page.getByLabel('From version').selectOption(String(step.from));
    await page.getByLabel('To version').selectOption(String(step.to));
    await page.getByRole('button', { name: 'Show diff', exact: true }).click();
    const region = page.getByRole('region', { name: 'Diff' });
    await region.getByText(`Version ${step.from} → version ${step.to}`).waitFor({ timeout: 10000 })
      .catch(() => problems.push(`the diff of ${step.from} → ${step.to} did not appear`));
    const changed = await region.locator('tr', { hasText: /added|removed/ }).count();
    if (!changed && !step.identical) problems.push('the diff shows no changed line');
    await inspect(ctx, `diff-${step.tool}-${step.from}-${step.to}`, response);
    return { changedLines: changed };
  },

  async tryIt(ctx, step) {
    const { page, problems } = ctx;
    const response = await page.goto(`${opts.origin}/console/tools/${step.tool}`);
    for (const [name, value] of Object.entries(step.arguments || {})) {
      const field = page.getByLabel(new RegExp(`^${escapeRe(name)} \\(`));
      const tag = await field.evaluate((el) => el.localName);
      if (tag === 'select') await field.selectOption(typeof value === 'string' ? value : JSON.stringify(value));
      else await field.fill(typeof value === 'string' ? value : JSON.stringify(value));
    }
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    const region = page.getByRole('region', { name: 'Try-it result' });
    await region.getByText(/Result of call/).waitFor({ timeout: 30000 }).catch(() => problems.push('no try-it result appeared'));
    const text = await region.innerText();
    for (const want of [step.contains || []].flat()) {
      if (!text.includes(want)) problems.push(`the result does not contain ${JSON.stringify(want)}`);
    }
    const images = await region.locator('img').count();
    if (step.images !== undefined && images !== step.images) problems.push(`the result shows ${images} images, not ${step.images}`);
    // The result page is a POST answer, which `shoot` (a GET) cannot reach: shot here.
    const file = step.shoot ? await screenshot(region, opts.curated, step.shoot, { fullPage: false }) : undefined;
    await inspect(ctx, `try-${step.tool}`, response);
    return { result: text.slice(0, 2000), images, file };
  },

  async rollback(ctx, step) {
    const { page, problems } = ctx;
    await page.goto(`${opts.origin}/console/tools/${step.tool}`);
    const button = page.getByRole('button', { name: `Roll back to version ${step.version}`, exact: true });
    const [response] = await Promise.all([page.waitForNavigation(), button.click()]);
    const message = await page.getByRole('status').first().innerText().catch(() => '');
    if (await button.count()) problems.push(`version ${step.version} is still not current: ${message}`);
    await inspect(ctx, `rollback-${step.tool}-${step.version}`, response);
    return { message };
  },

  async approve(ctx, step) {
    const { page, problems } = ctx;
    await page.goto(`${opts.origin}/console/approvals`);
    const link = page.getByRole('link', { name: `Review ${step.tool} version ${step.version}` });
    const [review] = await Promise.all([page.waitForNavigation(), link.click()]);
    await inspect(ctx, `review-${step.tool}-${step.version}`, review);
    for (const secret of step.grants || []) {
      await page.getByLabel(new RegExp(`^Grant ${escapeRe(secret)} to `)).check();
    }
    const [response] = await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: `Approve version ${step.version}` }).click()]);
    const message = await page.getByRole('status').first().innerText().catch(() => '');
    if (await page.getByRole('link', { name: `Review ${step.tool} version ${step.version}` }).count()) problems.push('the version is still pending after approval');
    await inspect(ctx, `approved-${step.tool}-${step.version}`, response);
    return { message };
  },

  async reject(ctx, step) {
    const { page, problems } = ctx;
    await page.goto(`${opts.origin}/console/approvals`);
    await Promise.all([page.waitForNavigation(), page.getByRole('link', { name: `Review ${step.tool} version ${step.version}` }).click()]);
    await page.getByLabel('Reason for rejecting').fill(step.reason || 'rejected by the browser test');
    const [response] = await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: `Reject version ${step.version}` }).click()]);
    const message = await page.getByRole('status').first().innerText().catch(() => '');
    if (await page.getByRole('link', { name: `Review ${step.tool} version ${step.version}` }).count()) problems.push('the version is still pending after rejection');
    await inspect(ctx, `rejected-${step.tool}-${step.version}`, response);
    return { message };
  },

  async readOnly(ctx, step) {
    const { page, problems } = ctx;
    const catalog = await page.goto(`${opts.origin}/console/tools`);
    for (const name of ['Approvals', 'Secrets', 'Server']) {
      if (await page.locator('nav[aria-label="Console"]').getByRole('link', { name }).count()) problems.push(`the navigation offers ${name}`);
    }
    await inspect(ctx, 'catalog-read-only', catalog);
    const response = await page.goto(`${opts.origin}/console/tools/${step.tool}`);
    const edit = /^(Roll back to version \d+|Disable tool|Enable tool|Run the examples again|Approve version \d+|Reject version \d+|Save secret|Grant|Revoke.*)$/;
    const buttons = await page.getByRole('button').allInnerTexts();
    const found = buttons.map((b) => b.trim()).filter((b) => edit.test(b));
    if (found.length) problems.push(`edit controls shown: ${found.join(', ')}`);
    await inspect(ctx, `tool-read-only-${step.tool}`, response);
    // Hidden buttons are not the defence: a well-formed change must be refused by the server.
    const csrf = await csrfOf(page);
    const forged = await page.request.post(`${opts.origin}/console/tools/${step.tool}/enabled`, {
      headers: { Origin: opts.origin }, form: { csrf, enabled: 'false' }, maxRedirects: 0,
    });
    if (![403, 404].includes(forged.status())) problems.push(`a change by a read-only user got ${forged.status()}, not 403 or 404`);
    return { buttons, forgedStatus: forged.status() };
  },

  async csrfRefused(ctx, step) {
    const { page, problems } = ctx;
    await page.goto(`${opts.origin}/console/tools/${step.tool}`);
    const button = page.getByRole('button', { name: /^(Disable|Enable) tool$/ });
    const label = (await button.innerText()).trim();
    await button.evaluate((b) => b.form.querySelector('input[name="csrf"]').remove());
    const [response] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), button.click()]);
    if (response.status() !== 403) problems.push(`a change without its CSRF token got ${response.status()}, not 403`);
    await page.waitForLoadState('load');
    await inspect(ctx, `csrf-refused-${step.tool}`, null);
    await page.goto(`${opts.origin}/console/tools/${step.tool}`);
    const now = (await page.getByRole('button', { name: /^(Disable|Enable) tool$/ }).innerText()).trim();
    if (now !== label) problems.push(`the refused change happened anyway (${label} → ${now})`);
    // A token from another session is no better than none.
    const wrong = await page.request.post(`${opts.origin}/console/tools/${step.tool}/enabled`, {
      headers: { Origin: opts.origin }, form: { csrf: 'A'.repeat(43), enabled: 'false' }, maxRedirects: 0,
    });
    if (wrong.status() !== 403) problems.push(`a change with a made-up CSRF token got ${wrong.status()}, not 403`);
    return { status: response.status(), wrongTokenStatus: wrong.status() };
  },

  async originRefused(ctx, step) {
    const { page, problems } = ctx;
    await page.goto(`${opts.origin}/console/tools/${step.tool}`);
    const csrf = await csrfOf(page);
    const url = `${opts.origin}/console/tools/${step.tool}/enabled`;
    const statuses = {};
    for (const [name, headers] of [['foreign', { Origin: 'https://evil.example' }], ['null', { Origin: 'null' }], ['missing', {}],
      ['cross-site fetch metadata', { Origin: opts.origin, 'Sec-Fetch-Site': 'cross-site' }]]) {
      const r = await page.request.post(url, { headers, form: { csrf, enabled: 'false' }, maxRedirects: 0 });
      statuses[name] = r.status();
      if (r.status() !== 403) problems.push(`a change with ${name} Origin got ${r.status()}, not 403`);
    }
    const json = await page.request.post(url, { headers: { Origin: opts.origin, 'Content-Type': 'application/json' }, data: JSON.stringify({ csrf, enabled: 'false' }), maxRedirects: 0 });
    statuses.json = json.status();
    if (json.status() < 400) problems.push(`a JSON change got ${json.status()}`);
    return { statuses };
  },

  async mcpRefusesCookie(ctx, step) {
    const { page, problems } = ctx;
    const cookie = await sessionCookie(ctx);
    if (!cookie) problems.push('not signed in: no console cookie to offer /mcp');
    const r = await page.request.post(`${opts.origin}${step.path || '/mcp'}`, {
      headers: { Cookie: `${COOKIE}=${cookie?.value}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      data: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    if (r.status() !== 401) problems.push(`/mcp with only the console cookie got ${r.status()}, not 401`);
    return { status: r.status() };
  },

  async shoot(ctx, step) {
    const { page } = ctx;
    await page.setViewportSize({ width: step.width || 1280, height: step.height || 800 });
    const response = await page.goto(`${opts.origin}${step.path}`);
    if (response.status() !== 200) ctx.problems.push(`${step.path}: status ${response.status()}`);
    const target = step.selector ? page.locator(step.selector).first() : page;
    const file = await screenshot(target, opts.curated, step.name, { fullPage: false });
    await page.setViewportSize({ width: VIEWPORTS[0].width, height: VIEWPORTS[0].height });
    drain(ctx.watch);
    return { file };
  },

  async signOut(ctx) {
    const { page, problems } = ctx;
    const old = await sessionCookie(ctx);
    await Promise.all([page.waitForURL((u) => u.pathname.endsWith('/sign-in')), page.getByRole('button', { name: 'Sign out', exact: true }).click()]);
    if (old) {
      const r = await page.request.get(`${opts.origin}/console/tools`, { headers: { Cookie: `${COOKIE}=${old.value}` }, maxRedirects: 0 });
      if (r.status() === 200) problems.push('the old session cookie still opens the catalog after sign-out');
    }
    return {};
  },
};

const started = Date.now();
const watchdog = setTimeout(() => {
  console.log(JSON.stringify({ ok: false, error: 'the driver ran out of time', seconds: (Date.now() - started) / 1000 }));
  console.log('0 passed, 1 failed');
  process.exit(1);
}, Number(process.env.OMNIFORGE_CONSOLE_TIMEOUT_MS || 300000));
watchdog.unref();

const browser = await launch();
const used = versions(browser);
const results = [];
try {
  const { context, watch } = await openContext(browser, opts.origin);
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  const shared = { context, page, watch, counter: 0 };
  for (const step of opts.steps) {
    const run = steps[step.do];
    const ctx = { ...shared, problems: [], pages: [] };
    const t0 = Date.now();
    let detail = {};
    if (!run) ctx.problems.push(`unknown step ${step.do}`);
    else {
      try {
        detail = (await run(ctx, step)) || {};
      } catch (error) {
        ctx.problems.push(`threw: ${error.message.split('\n')[0]}`);
        await screenshot(page, opts.out, `${String(shared.counter++).padStart(2, '0')}-error-${step.do}`).catch(() => {});
      }
    }
    shared.counter = ctx.counter;
    results.push({ step, ok: ctx.problems.length === 0, problems: ctx.problems, seconds: (Date.now() - t0) / 1000, ...detail, pages: ctx.pages });
  }
  await context.close();
} finally {
  await browser.close();
}

const failed = results.filter((r) => !r.ok).length;
console.log(JSON.stringify({ ok: failed === 0, url: opts.origin, ...used, out: opts.out, seconds: (Date.now() - started) / 1000, steps: results }, null, 2));
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
