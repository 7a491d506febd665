/**
 * docs/cli.md is the commands' own rendering (npm run docs:cli), and the surface keeps one vocabulary: every command
 * takes --json, help texts name the same roles and defaults as the code.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentProgress } from '@assay/core';
import { ROLES } from '@assay/ledger';
import { DEFAULT_GC_GRACE_MS } from '@assay/snapshots';
import { buildProgram } from '../../apps/cli/src/main';
import { commandPath, leafCommands, renderCliReference } from '../../apps/cli/src/cli-reference';
import { ROLE_HELP } from '../../apps/cli/src/commands/keys.commands';
import { GC_GRACE_HELP_SECONDS } from '../../apps/cli/src/commands/snapshot.commands';
import { REPO_ROOT } from '../support/child-process';

const program = () => buildProgram({ home: '.assay', out: () => undefined, err: () => undefined, progress: () => silentProgress });

describe('docs/cli.md', () => {
  it('is the rendering of the registered commands (run `npm run docs:cli` after changing a command)', () => {
    const onDisk = readFileSync(join(REPO_ROOT, 'docs/cli.md'), 'utf8');
    expect(onDisk).toBe(renderCliReference(program()));
  });
});

describe('one vocabulary', () => {
  it('every command takes --json', () => {
    const without = leafCommands(program())
      .filter((c) => !c.options.some((o) => o.long === '--json'))
      .map(commandPath);
    expect(without).toEqual([]);
  });

  it('the same names for the same things across commands', () => {
    const flags = leafCommands(program()).flatMap((c) =>
      c.options.filter((o) => !(o as { hidden?: boolean }).hidden).map((o) => `${commandPath(c)} ${o.long ?? ''}`),
    );
    // the primary score is --metric everywhere; files and directories a command creates are -o/--output
    expect(flags.filter((f) => /--primary-reward|--out$|--outfile|--output-dir/.test(f))).toEqual([]);
    expect(
      flags
        .filter((f) => f.endsWith(' --metric'))
        .map((f) => f.split(' --')[0])
        .sort(),
    ).toEqual(['baseline', 'judge', 'run']);
  });

  it('help texts name what the code accepts', () => {
    expect(ROLE_HELP).toBe(`${ROLES.slice(0, -1).join(', ')} or ${ROLES[ROLES.length - 1]}`);
    expect(GC_GRACE_HELP_SECONDS).toBe(DEFAULT_GC_GRACE_MS / 1000);
  });
});
