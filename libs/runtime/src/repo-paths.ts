import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/** The repository (or installed package) root: the nearest ancestor holding task-runtime/judge/entrypoint. */
export function assayRoot(from: string = __dirname): string {
  let d = resolve(from);
  for (;;) {
    if (existsSync(join(d, 'task-runtime', 'judge', 'entrypoint'))) return d;
    const up = dirname(d);
    if (up === d) throw new Error(`cannot find task-runtime/judge above ${from}`);
    d = up;
  }
}
