/**
 * The web pages under /ui/ (docs/web.md) in headless Chromium, against the HTTP API on a real signed ledger: the task
 * list, a leaderboard with two protocol groups (tables, ranks, scores, what differs, sorting, hostile text shown as
 * text), a completed run (chart pixels and points, rounds, report), a running run that the page follows live while
 * events are appended, and the ledger page (checkpoint, inclusion check in the browser). On every page: no console
 * error, no page error, no CSP violation, no request off 127.0.0.1. A screenshot of each page goes to
 * .artifacts/screenshots/ (ignored by git).
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import type { Browser, Page } from 'playwright-core';
import { ManualClock, SequentialIds } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import type { LeaderboardGroup, Trajectory } from '@assay/projections';
import { createApi } from '../../apps/api/src/main';
import { makeTmpDir } from '../support/ledger-fixtures';
import { describeBrowser, guardedPage, launchChromium, type GuardedPage } from '../support/browser';
import { homeWith, preamble, sampleVariant, type EventDraft } from '../projections/projection-fixtures';

jest.setTimeout(60_000);

const REPO = resolve(__dirname, '..', '..');
const SHOTS = join(REPO, '.artifacts', 'screenshots');
const HOSTILE_AGENT = '<img src=x onerror="window.__assayXss=1"><b>bold</b> & agent';
const OTHER_FP = 'sha256:' + 'b'.repeat(64);

/** Polls `fn` until it returns a value other than undefined, or fails with `what` after `ms`. */
async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

let writers = 0;
/**
 * appendTo (tests/projections/projection-fixtures.ts) with a clock that starts at `at`: appendTo's own clock starts
 * again at 10:00 each time, which would date these events before the run's start. Appends, then signs a checkpoint;
 * returns the ledger's size.
 */
async function appendAt(home: string, events: readonly EventDraft[], at: string): Promise<number> {
  writers += 1;
  const h = new LedgerHome(home, { clock: new ManualClock(at, 1000), ids: new SequentialIds(`fffffff${writers}-0000-4000-8000`) });
  try {
    for (const e of events) await h.ledger.append(e.stream, [{ type: e.type, data: e.data }]);
    await h.ledger.checkpoint();
    return await h.db.events.size();
  } finally {
    await h.close();
  }
}

/** The text of every cell of a table body, row by row. */
const cells = (page: Page, table: string): Promise<string[][]> =>
  page.evaluate(
    `Array.from(document.querySelectorAll(${JSON.stringify(`${table} tbody tr`)})).map((tr) => Array.from(tr.cells).map((td) => td.textContent))`,
  ) as Promise<string[][]>;

/** An attribute of every element that `selector` matches, in document order. */
const attrs = (page: Page, selector: string, name: string): Promise<Array<string | null>> =>
  page.evaluate(`Array.from(document.querySelectorAll(${JSON.stringify(selector)})).map((e) => e.getAttribute(${JSON.stringify(name)}))`) as Promise<
    Array<string | null>
  >;

describeBrowser('web pages in a browser', () => {
  let tmp: { dir: string; cleanup(): void };
  let home: string;
  let app: INestApplication;
  let base: string;
  let browser: Browser;
  let size: number;
  /** The running run's events, in three parts: appended before the page opens, while it is open, and RunCompleted. */
  let live: [EventDraft[], EventDraft[], EventDraft[]];
  const open: GuardedPage[] = [];

  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${base}${path}`);
    if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status}`);
    return (await res.json()) as T;
  };

  /** A fresh guarded page at `path` under /ui/. */
  const visit = async (path: string): Promise<GuardedPage> => {
    const g = await guardedPage(browser);
    open.push(g);
    await g.page.goto(`${base}/ui/${path}`, { waitUntil: 'load' });
    return g;
  };

  const shot = (g: GuardedPage, name: string): Promise<Buffer> => g.page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

  /** Nothing went wrong on the page: no console error, page error, CSP violation or off-host request. */
  const clean = async (g: GuardedPage): Promise<void> => {
    await g.page.waitForTimeout(100); // late console messages
    expect(g.problems()).toEqual([]);
  };

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    tmp = makeTmpDir('assay-web-browser-');
    home = join(tmp.dir, 'home');
    const hostile = sampleVariant({ run: 'r-b', fingerprint: OTHER_FP, scores: [0.6, 0.5, 0.45] });
    (hostile.find((e) => e.type === 'RunStarted')!.data as { agent: string }).agent = HOSTILE_AGENT;
    const all = sampleVariant({ run: 'r-live', scores: [0.8, 0.7, 0.25] });
    const done = all.findIndex((e) => e.type === 'RunCompleted');
    // everything before round 3's submission (rounds 1 and 2), then rounds 3 to 5, then RunCompleted
    const cut = all.findIndex((e) => e.type === 'SubmissionReceived' && (e.data as { round: number }).round === 3);
    live = [all.slice(0, cut), all.slice(cut, done), all.slice(done)];
    const [started, browserUp] = await Promise.allSettled([
      (async () => {
        size = await homeWith(home, [
          ...preamble(),
          ...sampleVariant({ run: 'r-a' }),
          ...sampleVariant({ run: 'r-c', scores: [0.3, 0.2, 0.1] }),
          ...hostile,
          ...live[0],
        ]);
        app = await createApi(home, { ASSAY_API_RATE_LIMIT: '100000' });
        await app.listen(0, '127.0.0.1');
        base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
      })(),
      launchChromium(),
    ]);
    if (browserUp.status === 'fulfilled') browser = browserUp.value;
    if (started.status === 'rejected') throw started.reason;
    if (browserUp.status === 'rejected') throw browserUp.reason;
  });

  afterEach(async () => {
    for (const g of open.splice(0)) await g.close().catch(() => undefined);
  });

  afterAll(async () => {
    if (browser) await browser.close();
    if (app) await app.close();
    tmp?.cleanup();
  });

  it('notices an off-host request, a console error, a page error and a CSP violation (so that their absence means something)', async () => {
    const bare = await guardedPage(browser);
    open.push(bare);
    // no CSP on about:blank: the image request reaches the route, which refuses it
    await bare.page.setContent('<p>guard</p>');
    await bare.page.evaluate(`(() => {
      const img = document.createElement('img');
      img.src = 'http://example.invalid/pixel.png';
      document.body.appendChild(img);
      console.error('a deliberate console error');
      setTimeout(() => { throw new Error('a deliberate page error'); }, 0);
    })()`);
    await until('the guard to notice', async () => (bare.offHost.length && bare.pageErrors.length ? true : undefined));
    expect(bare.offHost).toEqual(['http://example.invalid/pixel.png']);
    expect(bare.consoleErrors).toEqual(expect.arrayContaining([expect.stringContaining('a deliberate console error')]));
    expect(bare.pageErrors).toEqual([expect.stringContaining('a deliberate page error')]);
    // on the API's pages the CSP refuses inline script: the violation is seen and reported
    const g = await visit('index.html');
    await g.page.evaluate(`(() => {
      const s = document.createElement('script');
      s.textContent = 'window.__assayInline = 1';
      document.body.appendChild(s);
    })()`);
    await until('the CSP violation', async () => (g.cspViolations.length ? true : undefined));
    expect(g.cspViolations).toEqual([expect.stringMatching(/^script-src/)]);
    expect(await g.page.evaluate('window.__assayInline')).toBeUndefined();
    expect(g.problems().length).toBeGreaterThan(0);
  });

  it('lists the tasks, each linking to its leaderboard', async () => {
    const g = await visit('index.html');
    await g.page.locator('#tasks li').first().waitFor();
    const tasks = await api<{ tasks: Array<{ task: string; runs: number }> }>('/tasks');
    expect(await g.page.locator('#tasks li').allTextContents()).toEqual(tasks.tasks.map((t) => `${t.task} ${t.runs} runs`));
    expect(await g.page.locator('#tasks a').getAttribute('href')).toBe('leaderboard.html?task=tiny-optimizer');
    await shot(g, 'index');
    await clean(g);
  });

  it('shows a table per protocol group with the ranks and scores the API returns, what differs, sorting, and hostile text as text', async () => {
    const g = await visit('leaderboard.html?task=tiny-optimizer');
    const { page } = g;
    const lb = await api<{ groups: LeaderboardGroup[] }>('/leaderboards/tiny-optimizer');
    expect(lb.groups).toHaveLength(2);
    await page.locator('section.group').nth(1).waitFor();
    expect(await page.locator('section.group').count()).toBe(2);
    for (const [i, group] of lb.groups.entries()) {
      const table = `section.group:nth-of-type(${i + 1}) table.sortable`;
      expect(await page.locator(`section.group:nth-of-type(${i + 1}) h2`).textContent()).toBe(`Group ${i + 1}: ${group.metric} (${group.direction})`);
      const rows = await cells(page, table);
      // rank, run, agent, ..., best score (6 significant digits, the exact value in the title)
      expect(rows.map((r) => [r[0], r[1], r[2], r[5]])).toEqual(
        group.rows.map((r) => [r.rank === null ? '—' : String(r.rank), r.run, r.agent, r.best ? String(Number(r.best.score.toPrecision(6))) : '—']),
      );
      const titles = await attrs(page, `${table} tbody tr td:nth-child(6) span.num`, 'title');
      expect(titles).toEqual(group.rows.filter((r) => r.best).map((r) => String(r.best!.score)));
    }
    const [g1, g2] = lb.groups;
    expect(g1!.rows.map((r) => r.run)).toEqual(['r-c', 'r-a', 'r-live']);
    expect(g2!.rows.map((r) => r.run)).toEqual(['r-b']);
    expect(g2!.fingerprint).toBe(OTHER_FP);

    // what differs: only under the second group, naming the fingerprint
    expect(await page.locator('section.group:nth-of-type(1) ul.differences li').count()).toBe(0);
    const differs = await page.locator('section.group:nth-of-type(2) ul.differences li').allTextContents();
    expect(differs).toEqual([expect.stringMatching(/^group 2 differs from group 1 in its protocol fingerprint sha256:bbbbbbbbb.*\(group 1: sha256:5aef/)]);

    // the agent's markup is text: no element was made of it, and nothing ran
    const agentCell = page.locator('section.group:nth-of-type(2) table.sortable tbody tr td:nth-child(3)');
    expect(await agentCell.textContent()).toBe(HOSTILE_AGENT);
    expect(await agentCell.locator('*').count()).toBe(0);
    expect(await page.locator('main img, main b').count()).toBe(0);
    expect(await page.evaluate('window.__assayXss')).toBeUndefined();

    // sorting group 1: by run (ascending, descending, then the ranking again), and by best score (best first)
    const runs = async (): Promise<string[]> => (await cells(page, 'section.group:nth-of-type(1) table.sortable')).map((r) => r[1]!);
    const header = (label: string) => page.locator('section.group:nth-of-type(1) thead button.sort', { hasText: new RegExp(`^${label}$`) });
    const ranked = g1!.rows.map((r) => r.run);
    expect(await runs()).toEqual(ranked);
    await header('run').click();
    expect(await runs()).toEqual(['r-a', 'r-c', 'r-live']);
    expect(await page.locator('section.group:nth-of-type(1) thead th').nth(1).getAttribute('aria-sort')).toBe('ascending');
    await header('run').click();
    expect(await runs()).toEqual(['r-live', 'r-c', 'r-a']);
    expect(await page.locator('section.group:nth-of-type(1) thead th').nth(1).getAttribute('aria-sort')).toBe('descending');
    await header('run').click();
    expect(await runs()).toEqual(ranked);
    await header('best score').click();
    const byBest = [...g1!.rows].filter((r) => r.best).sort((a, b) => a.best!.score - b.best!.score);
    expect((await runs()).slice(0, byBest.length)).toEqual(byBest.map((r) => r.run));
    await header('best score').click();
    expect((await runs()).slice(0, byBest.length)).toEqual(byBest.map((r) => r.run).reverse());
    // the other group's table is not touched
    expect((await cells(page, 'section.group:nth-of-type(2) table.sortable')).map((r) => r[1])).toEqual(['r-b']);

    await shot(g, 'leaderboard');
    await clean(g);
  });

  it('shows a completed run: a chart with a point per round, the rounds with their snapshots, and the report', async () => {
    const g = await visit('run.html?run=r-a');
    const { page } = g;
    const t = await api<Trajectory>('/runs/r-a/trajectory');
    expect(t.rounds.map((r) => r.round)).toEqual([1, 2, 3, 4, 5]);
    await page.locator('#chart canvas').first().waitFor();
    await page.locator('#report h3').first().waitFor();

    expect(await page.locator('#chart').getAttribute('data-points')).toBe(String(t.rounds.length));
    // the score dots (#1f6feb) and the best-so-far staircase (#1a7f37) are drawn on the canvas
    const px = (await page.evaluate(`(() => {
      const c = document.querySelector('#chart canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const near = (i, r, g, b) => Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) < 40 && d[i + 3] > 200;
      let inked = 0, blue = 0, green = 0;
      for (let i = 0; i < d.length; i += 4) {
        if (d[i + 3] > 0) inked++;
        if (near(i, 0x1f, 0x6f, 0xeb)) blue++;
        if (near(i, 0x1a, 0x7f, 0x37)) green++;
      }
      return { width: c.width, height: c.height, inked, blue, green };
    })()`)) as { width: number; height: number; inked: number; blue: number; green: number };
    expect(px.width).toBeGreaterThan(300);
    expect(px.inked).toBeGreaterThan(1000);
    expect(px.blue).toBeGreaterThan(20);
    expect(px.green).toBeGreaterThan(20);

    // the rounds table: one row per round, its snapshot shortened with the full CID in the title
    const rows = await cells(page, '#rounds table');
    expect(rows.map((r) => r[0])).toEqual(t.rounds.map((r) => String(r.round)));
    expect(rows.map((r) => r[2])).toEqual(t.rounds.map((r) => r.status));
    const snaps = await attrs(page, '#rounds tbody tr td:nth-child(7) span', 'title');
    expect(snaps).toEqual(t.rounds.map((r) => r.snapshot));
    for (const s of snaps) expect(s).toMatch(/^bafy[a-z2-7]{50,}$/);

    // the summary and the report's parts
    const summary = await page.locator('#summary').textContent();
    expect(summary).toContain('completed');
    expect(summary).toContain('0.433 in round 5');
    expect(await page.locator('#live').textContent()).toBe('The run is completed.');
    expect(await page.locator('#report h3').allTextContents()).toEqual(expect.arrayContaining(['reproducibility', 'budget']));
    expect(await page.locator('#report table').count()).toBeGreaterThan(0);

    await shot(g, 'run');
    await clean(g);
  });

  it('follows a running run live: new rounds and the completion appear without a reload', async () => {
    const g = await visit('run.html?run=r-live');
    const { page } = g;
    const rowCount = () => page.locator('#rounds tbody tr').count();
    await until('the first two rounds', async () => ((await rowCount()) === 2 ? true : undefined));
    await until('the live stream', async () => ((await page.locator('#live').textContent())?.startsWith('Live: ') ? true : undefined));
    expect(await page.locator('#summary').textContent()).toContain('running');
    expect(await page.locator('#chart').getAttribute('data-points')).toBe('2');
    await page.evaluate('window.__assayNoReload = 1');
    await shot(g, 'run-live');

    size = await appendAt(home, live[1], '2026-12-01T10:10:00.000Z');
    const t0 = Date.now();
    await until('rounds 3 to 5', async () => ((await rowCount()) === 5 ? true : undefined), 10_000);
    const grew = Date.now() - t0;
    expect(await page.locator('#chart').getAttribute('data-points')).toBe('5');
    expect(await page.locator('#summary').textContent()).toContain('running');

    size = await appendAt(home, live[2], '2026-12-01T10:20:00.000Z');
    await until('the completion', async () => ((await page.locator('#live').textContent()) === 'The run is completed: no more updates.' ? true : undefined));
    const summary = await page.locator('#summary').textContent();
    expect(summary).toContain('completed');
    expect(summary).not.toContain('running');
    expect(summary).toContain('0.25 in round 5');
    await page.locator('#report h3').first().waitFor();
    expect(await page.evaluate('window.__assayNoReload')).toBe(1);
    const t = await api<Trajectory>('/runs/r-live/trajectory');
    const elapsed = t.rounds.map((r) => r.elapsedMs);
    expect(elapsed).toEqual([...elapsed].sort((a, b) => a - b));
    expect((await cells(page, '#rounds table')).map((r) => r[0])).toEqual(t.rounds.map((r) => String(r.round)));
    console.log(`live: 3 more rounds shown ${grew} ms after their checkpoint`);

    await shot(g, 'run-completed-live');
    await clean(g);
  });

  it("shows the ledger's latest checkpoint and checks an event's inclusion in the browser", async () => {
    const g = await visit('ledger.html');
    const { page } = g;
    const cp = await api<{ treeSize: number; rootHash: string }>('/ledger/checkpoints/latest');
    expect(cp.treeSize).toBe(size);
    const treeSize = page.locator('xpath=//div[@id="checkpoint"]//dt[normalize-space()="tree size"]/following-sibling::dd[1]');
    await treeSize.waitFor();
    expect(await treeSize.textContent()).toBe(String(size));
    expect(await page.locator('#checkpoint').textContent()).toContain(cp.rootHash);
    expect(await page.locator('#position').inputValue()).toBe(String(size - 1));

    await page.locator('#position').fill('3');
    await page.locator('#inclusion-form button[type=submit]').click();
    const verdict = page.locator('#inclusion .verdict-box');
    await verdict.waitFor();
    expect(await verdict.getAttribute('class')).toBe('verdict-box yes');
    expect(await verdict.locator('strong').textContent()).toBe('included: yes');
    expect(await page.locator('#inclusion ul.steps li.fail').count()).toBe(0);
    const event = page.locator('xpath=//div[@id="inclusion"]//dt[normalize-space()="position"]/following-sibling::dd[1]');
    expect(await event.textContent()).toBe('3');
    expect(await page.locator('#hasher').textContent()).toBe('SHA-256 by Web Crypto');

    await shot(g, 'ledger');
    await clean(g);
  });
});
