// Browser test of the cairn dashboard: Debian's chromium, driven by playwright-core.
//
//   CAIRN_URL    base URL serving the dashboard at / and the API under /v1/ (required)
//   CAIRN_KEY    an API key with the read scope (and submit for CAIRN_LIVE); unset: no sign-in
//   SCREENSHOTS  folder for dashboard-tasks.png and dashboard-task.png (default: .)
//   CAIRN_LIVE=1 first submit a goal through the form and follow it live over SSE to its end
//   CAIRN_APPROVE=1 then submit a goal asking to sign off its calls (`steps`; the key needs the
//                approve scope) and approve each request on the task page until the task ends
//   CAIRN_TASK   open this task id instead of choosing one from the list
//   CHROMIUM     the browser (default /usr/bin/chromium)
//
// Exits 0 when every check passed, 1 with a line saying what was missing otherwise.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const base = (process.env.CAIRN_URL || '').replace(/\/+$/, '');
const key = process.env.CAIRN_KEY || '';
const shots = process.env.SCREENSHOTS || '.';
const live = process.env.CAIRN_LIVE === '1';
const chosen = process.env.CAIRN_TASK || '';
const approve = process.env.CAIRN_APPROVE === '1';
const TIMEOUT = Number(process.env.CAIRN_TIMEOUT_MS || 60000);

class Missing extends Error {}

/** Waits for `count` elements matching `selector`, or fails with `what` in words. */
async function expectAtLeast(page, selector, count, what, timeout = TIMEOUT) {
  try {
    await page.waitForFunction(([sel, n]) => document.querySelectorAll(sel).length >= n,
      [selector, count], { timeout, polling: 200 });
  } catch {
    const found = await page.locator(selector).count();
    const errors = await page.locator('.notice.error').allTextContents();
    throw new Missing(`${what}: expected at least ${count} of ${selector}, found ${found}` +
      (errors.length ? `; the page says: ${errors.join(' | ')}` : ''));
  }
}

async function signIn(page) {
  const form = page.locator('#sign-in');
  try { await form.waitFor({ timeout: 15000 }); } catch {
    throw new Missing('CAIRN_KEY is set but the page never asked for a key (is authentication on?)');
  }
  // A wrong key must be refused in words and leave the form up.
  await page.fill('#api-key', 'cairn_0000000000000000_not-a-real-secret');
  await page.click('#sign-in button[type=submit]');
  try {
    await page.locator('#sign-in .notice.error', { hasText: 'did not accept' }).waitFor({ timeout: 10000 });
  } catch { throw new Missing('a wrong API key was not refused with a message on the sign-in form'); }
  await page.fill('#api-key', key);
  await page.click('#sign-in button[type=submit]');
  try { await page.locator('#sign-in').waitFor({ state: 'detached', timeout: 10000 }); } catch {
    const msg = await page.locator('#sign-in .notice').allTextContents();
    throw new Missing(`signing in with CAIRN_KEY failed: ${msg.join(' ') || 'the form stayed up'}`);
  }
}

/** Submits a goal whose calls wait for a sign-off and approves each on the task page. */
async function approveLive(page) {
  await page.goto(`${base}/#/new`);
  await page.locator('#submit-form').waitFor({ timeout: 15000 });
  await page.fill('#goal', 'Rename config key db.url to db.dsn in services A, B and C');
  await page.selectOption('#strategy', 'v2');
  await page.selectOption('#approval-mode', 'steps');
  await page.click('#submit-form button[type=submit]');
  await page.waitForURL(/#\/tasks\/[0-9a-f-]{36}$/, { timeout: 15000 });
  let approved = 0;
  for (let round = 0; round < 20; round++) {
    const next = await Promise.race([
      page.locator('#approval-approve').waitFor({ timeout: TIMEOUT }).then(() => 'ask'),
      page.locator('#stream-state', { hasText: 'ended' }).waitFor({ timeout: TIMEOUT }).then(() => 'ended'),
    ]).catch(() => 'timeout');
    if (next === 'ended') break;
    if (next === 'timeout') throw new Missing('the waiting task showed no approval request, and did not end');
    const asked = await page.locator('#approval li').allTextContents();
    if (!asked.length) throw new Missing('the approval request shows no call');
    const heading = await page.locator('#approval h3').textContent();
    await page.click('#approval-approve');
    approved += 1;
    // The next request may follow at once: wait for this one to leave, not for the panel.
    await page.waitForFunction((prev) => {
      const shown = document.querySelector('#approval h3');
      return !shown || shown.textContent !== prev;
    }, heading, { timeout: TIMEOUT, polling: 100 }).catch(async () => {
      const said = await page.locator('#approval .notice').allTextContents();
      throw new Missing(`approving "${heading}" left it on the page ${said.join(' ')}`);
    });
  }
  if (!approved) throw new Missing('the task asked for no approval');
  const terminal = await page.locator('ol.timeline li.event').last().getAttribute('data-kind');
  if (terminal !== 'task.succeeded') throw new Missing(`the approved task ended with ${terminal}`);
  console.log(`dashboard test: approved ${approved} requests on the task page; the task succeeded`);
}

/** Submits a goal through the form and follows the task until the page says it ended. */
async function submitLive(page) {
  await page.goto(`${base}/#/new`);
  await page.locator('#submit-form').waitFor({ timeout: 15000 });
  // Markup in the goal must be shown as text, never parsed.
  const goal = 'Rename config key db.url to db.dsn in services A, B and C <i class="xss">x</i>';
  await page.fill('#goal', goal);
  await page.selectOption('#strategy', 'v2');
  await page.click('#submit-form button[type=submit]');
  await page.waitForURL(/#\/tasks\/[0-9a-f-]{36}$/, { timeout: 15000 });
  await expectAtLeast(page, 'h2.goal', 1, 'the submitted task page');
  if (await page.locator('h2.goal i.xss').count() > 0) throw new Missing('the goal\'s markup was parsed as HTML');
  const shown = await page.locator('h2.goal').textContent();
  if (!shown.includes('<i class="xss">')) throw new Missing(`the goal is not shown as typed: ${shown}`);
  try {
    await page.locator('#stream-state', { hasText: /live|ended/ }).waitFor({ timeout: 20000 });
  } catch { throw new Missing('the event stream of the submitted task never connected'); }
  const state = await page.locator('#stream-state').textContent();
  console.log(`dashboard test: submitted ${page.url().split('/').pop()}, ${state}`);
  try {
    await page.locator('#stream-state', { hasText: 'ended' }).waitFor({ timeout: TIMEOUT * 3 });
  } catch { throw new Missing('the submitted task did not end within the time allowed (or its stream stalled)'); }
  const terminal = await page.locator('ol.timeline li.event').last().getAttribute('data-kind');
  if (!/^task\.(succeeded|failed|budget_exhausted|cancelled)$/.test(terminal || '')) {
    throw new Missing(`the timeline's last event is ${terminal}, not a terminal event`);
  }
}

async function run(page, seenUrls) {
  await page.goto(`${base}/`);
  if (key) await signIn(page);
  else if (await page.locator('#sign-in').isVisible({ timeout: 3000 }).catch(() => false)) {
    throw new Missing('the server asks for an API key: set CAIRN_KEY');
  }
  if (live) await submitLive(page);
  if (approve) await approveLive(page);

  await page.goto(`${base}/#/tasks`);
  await expectAtLeast(page, 'tr.task-row', 1, 'the task list shows no task (submit one first, or set CAIRN_LIVE=1)');
  await page.screenshot({ path: join(shots, 'dashboard-tasks.png'), fullPage: true });

  // A planned task that succeeded shows the most: milestones, ledger and artifacts.
  const id = chosen || await page.evaluate(() => {
    const rows = [...document.querySelectorAll('tr.task-row')];
    const planned = rows.filter((r) => r.dataset.planned === 'true');
    const pick = planned.find((r) => r.dataset.status === 'succeeded') || planned[0] || rows[0];
    return pick.dataset.id;
  });
  if (chosen) await page.goto(`${base}/#/tasks/${chosen}`);
  else await page.click(`tr.task-row[data-id="${id}"] td.goal a`);
  await page.waitForURL(new RegExp(`#/tasks/${id}$`), { timeout: 10000 });

  await expectAtLeast(page, 'svg.dag g.node', 1, `the milestone graph of task ${id} shows no milestone`);
  await expectAtLeast(page, 'ol.timeline li.event', 1, `the timeline of task ${id} shows no event`);
  await expectAtLeast(page, 'svg.ledger-chart rect.bar', 1, `the ledger chart of task ${id} has no bar`);
  await expectAtLeast(page, 'li.artifact', 1, `the artifacts of task ${id} are not shown`);
  await expectAtLeast(page, 'li.plan-version', 1, `the plan versions of task ${id} are not shown`);
  try { await page.locator('#stream-state', { hasText: /live|ended/ }).waitFor({ timeout: 15000 }); } catch {
    throw new Missing(`the event stream of task ${id} is neither live nor ended`);
  }
  const errors = await page.locator('.notice.error').allTextContents();
  if (errors.length) throw new Missing(`the task page shows errors: ${errors.join(' | ')}`);
  // Open the first event's JSON so the screenshot shows it.
  await page.locator('ol.timeline li.event summary').first().click();
  const milestones = await page.locator('svg.dag g.node').count();
  const events = await page.locator('ol.timeline li.event').count();
  await page.screenshot({ path: join(shots, 'dashboard-task.png'), fullPage: true });

  await page.goto(`${base}/#/stats`);
  await expectAtLeast(page, '#planner-stats dl.facts', 1, 'the planner statistics are not shown');
  await expectAtLeast(page, '#gate-stats dl.facts', 1, 'the gate statistics are not shown');

  if (key) {
    const leaked = await page.evaluate((k) => {
      const places = [JSON.stringify(localStorage), JSON.stringify(sessionStorage), document.cookie, location.href];
      return places.some((p) => p.includes(k));
    }, key);
    if (leaked) throw new Missing('the API key was found in storage, a cookie or the URL');
    if (seenUrls.some((r) => r.url.includes(key))) throw new Missing('the API key was sent in a URL');
    // With auth on, an EventSource can only be authorised by a stream token in its URL.
    const streams = seenUrls.filter((r) => r.type === 'eventsource');
    const bare = streams.find((r) => !/[?&]token=/.test(r.url));
    if (bare) throw new Missing(`an event stream was opened without a stream token: ${bare.url}`);
    if (live && !streams.length) throw new Missing('no event stream was opened for the submitted task');
  }
  return { id, milestones, events };
}

async function main() {
  if (!base) { console.error('dashboard test: set CAIRN_URL to the dashboard\'s base URL'); process.exit(2); }
  mkdirSync(shots, { recursive: true });
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox'],
  });
  const problems = [];
  const seenUrls = [];
  let page;
  try {
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.on('pageerror', (err) => problems.push(`script error: ${err.message}`));
    page.on('request', (req) => seenUrls.push({ url: req.url(), type: req.resourceType() }));
    page.on('console', (msg) => {
      // A 401 or 403 answer is logged by the browser as a failed load; those are expected while
      // signing in. A CSP violation ("Refused to ...") or any other error is not.
      if (msg.type() === 'error' && !/status of 40[13]/.test(msg.text())) problems.push(`console: ${msg.text()}`);
    });
    const got = await run(page, seenUrls);
    if (problems.length) throw new Missing(problems.join('\n  '));
    console.log(`dashboard test: passed: task ${got.id}, ${got.milestones} milestones, ${got.events} events; ` +
      `screenshots in ${shots}`);
  } catch (err) {
    if (page) await page.screenshot({ path: join(shots, 'dashboard-failure.png'), fullPage: true }).catch(() => {});
    const extra = problems.length && !(err.message || '').includes(problems[0]) ? `\n  ${problems.join('\n  ')}` : '';
    console.error(`dashboard test: FAILED: ${err instanceof Missing ? err.message : err.stack}${extra}`);
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

main();
