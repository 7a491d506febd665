/**
 * Browser-backed suites (the web pages under /ui/) drive Debian's Chromium with playwright-core. When no Chromium is
 * found the suite is one failing test naming what is missing and how to install it, never a skip, so that a run
 * without a browser cannot pass for a run with one.
 *
 * The browser never reaches anything off this machine: it is launched with a proxy that answers nothing (so even its
 * own background requests fail), and every page request goes through a route that lets only 127.0.0.1 through and
 * records whatever else was attempted (`GuardedPage.offHost`, which a test asserts is empty).
 */
import { existsSync, statSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type ConsoleMessage, type Page } from 'playwright-core';

/** Where Chromium is looked for when ASSAY_CHROMIUM is not set. */
export const CHROMIUM_CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser'];

const INSTALL_HINT = 'install it with `apt-get install chromium` (Debian; scripts/test.sh does when root), or set ASSAY_CHROMIUM to a Chromium binary';

const isFile = (p: string): boolean => {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
};

/** The Chromium binary to drive: ASSAY_CHROMIUM when set (it must exist), else the first of CHROMIUM_CANDIDATES present. */
export function findChromium(): { path: string | null; why: string } {
  const env = process.env.ASSAY_CHROMIUM;
  if (env !== undefined && env !== '') return isFile(env) ? { path: env, why: '' } : { path: null, why: `ASSAY_CHROMIUM=${env} is not a file` };
  const found = CHROMIUM_CANDIDATES.find((p) => existsSync(p) && isFile(p));
  return found ? { path: found, why: '' } : { path: null, why: `no Chromium at ${CHROMIUM_CANDIDATES.join(' or ')} and ASSAY_CHROMIUM is not set` };
}

/**
 * `describe` when Chromium is found; otherwise a suite of one failing test with the reason, never a skip (as Docker
 * suites: a run without a browser cannot pass for a run with one). `bash scripts/test.sh` installs Debian's chromium
 * when it runs as root; CI sets ASSAY_REQUIRE_BROWSER=1, which only adds that its setup step broke.
 */
export function describeBrowser(name: string, fn: () => void): void {
  const c = findChromium();
  if (c.path) return describe(name, fn);
  const where = process.env.ASSAY_REQUIRE_BROWSER === '1' ? ' (CI requires it: the setup in scripts/test.sh did not provide it)' : '';
  describe(name, () => {
    it('needs Chromium', () => {
      throw new Error(`Chromium is required${where}: ${c.why}; ${INSTALL_HINT}`);
    });
  });
}

/** A port nothing listens on (discard): the proxy every off-machine request of the browser goes to, and fails at. */
const DEAD_PROXY = 'http://127.0.0.1:9';

/** Headless Chromium (`--no-sandbox` only when running as root, where Chromium refuses its sandbox). */
export async function launchChromium(): Promise<Browser> {
  const c = findChromium();
  if (!c.path) throw new Error(`Chromium not found: ${c.why}; ${INSTALL_HINT}`);
  const args = ['--disable-dev-shm-usage', '--disable-gpu', '--no-first-run', '--no-default-browser-check', '--disable-component-update', '--no-pings'];
  if (typeof process.getuid === 'function' && process.getuid() === 0) args.unshift('--no-sandbox');
  return chromium.launch({
    executablePath: c.path,
    headless: true,
    args,
    proxy: { server: DEAD_PROXY, bypass: '127.0.0.1,localhost' },
    timeout: 30_000,
  });
}

/** A page in a fresh context with what went wrong on it: off-host requests, console errors, page errors, CSP violations. */
export interface GuardedPage {
  context: BrowserContext;
  page: Page;
  /** URLs the page tried to load from anywhere but 127.0.0.1 (aborted). */
  offHost: string[];
  /** Console messages of type error (CSP refusals among them) and warnings that mention the Content Security Policy. */
  consoleErrors: string[];
  /** Uncaught exceptions and unhandled rejections of the page. */
  pageErrors: string[];
  /** `securitypolicyviolation` events the page saw. */
  cspViolations: string[];
  /** Everything above in one list (empty when all is well). */
  problems(): string[];
  close(): Promise<void>;
}

const CSP_LISTENER = `
  document.addEventListener('securitypolicyviolation', (e) => {
    try { window.__assayCspViolation(e.violatedDirective + ' blocked ' + e.blockedURI + ' at ' + e.sourceFile + ':' + e.lineNumber); } catch (_e) {}
  });
`;

/** A page whose requests may go to 127.0.0.1 only, recording what else it attempted and every error it showed. */
export async function guardedPage(browser: Browser, opts: { viewport?: { width: number; height: number } } = {}): Promise<GuardedPage> {
  const context = await browser.newContext({ viewport: opts.viewport ?? { width: 1280, height: 900 }, serviceWorkers: 'block' });
  const g: GuardedPage = {
    context,
    page: undefined as unknown as Page,
    offHost: [],
    consoleErrors: [],
    pageErrors: [],
    cspViolations: [],
    problems: () => [
      ...g.offHost.map((u) => `off-host request: ${u}`),
      ...g.consoleErrors.map((m) => `console: ${m}`),
      ...g.pageErrors.map((m) => `page error: ${m}`),
      ...g.cspViolations.map((m) => `CSP violation: ${m}`),
    ],
    close: () => context.close(),
  };
  await context.route('**/*', (route) => {
    const url = route.request().url();
    let host = '';
    try {
      host = new URL(url).hostname;
    } catch {
      host = '';
    }
    if (host === '127.0.0.1') return route.continue();
    g.offHost.push(url);
    return route.abort('blockedbyclient');
  });
  await context.exposeFunction('__assayCspViolation', (text: string) => {
    g.cspViolations.push(String(text));
  });
  await context.addInitScript({ content: CSP_LISTENER });
  const page = await context.newPage();
  page.on('console', (m: ConsoleMessage) => {
    if (m.type() === 'error' || (m.type() === 'warning' && /Content Security Policy/i.test(m.text()))) {
      const loc = m.location();
      g.consoleErrors.push(`${m.type()}: ${m.text()}${loc.url ? ` (${loc.url}:${loc.lineNumber})` : ''}`);
    }
  });
  page.on('pageerror', (e: Error) => {
    g.pageErrors.push(e.stack ?? e.message);
  });
  g.page = page;
  return g;
}
