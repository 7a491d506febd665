import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The script a worker thread runs: `<dir>/<name>.js` in a build, or `<dir>/<name>.ts` through the repository's
 * TypeScript require hook (tests/support/ts-register.js) when running from sources (jest, ts-register). Worker code is
 * a real module, type-checked and imported like any other, never source text evaluated.
 */
export function workerEntry(dir: string, name: string): { file: string; execArgv: string[] } {
  const js = join(dir, `${name}.js`);
  if (existsSync(js)) return { file: js, execArgv: [] };
  for (let up = dir; up !== dirname(up); up = dirname(up)) {
    const hook = join(up, 'tests', 'support', 'ts-register.js');
    if (existsSync(hook)) return { file: join(dir, `${name}.ts`), execArgv: ['--require', hook] };
  }
  throw new Error(`worker script ${name} not found in ${dir} (build with \`npm run build\`)`);
}
