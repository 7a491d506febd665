import type { Command } from 'commander';
import type { CliContext } from '../cli-context';

/**
 * Each command group lives in its own `<group>.commands.ts` and exports `register(program, ctx)`.
 * Commands are thin: parse and validate arguments, call the application layer of a lib, print.
 */
type Register = (program: Command, ctx: CliContext) => void;

import { register as ledger } from './ledger.commands';
import { register as keys } from './keys.commands';
import { register as task } from './task.commands';
import { register as judge } from './judge.commands';
import { register as images } from './images.commands';
import { register as snapshot } from './snapshot.commands';
import { register as run } from './run.commands';
import { register as api } from './api.commands';
import { register as bundle } from './bundle.commands';
import { register as checkpoint } from './checkpoint.commands';
import { register as rejudge } from './rejudge.commands';
import { register as projections } from './projections.commands';
import { register as baseline } from './baseline.commands';
import { register as watch } from './watch.commands';

const groups: Register[] = [
  ledger,
  keys,
  task,
  judge,
  images,
  run,
  (p, ctx) => snapshot(p, ctx, { sink: 'ledger' }),
  api,
  bundle,
  checkpoint,
  rejudge,
  projections,
  baseline,
  watch,
];

export function registerCommands(program: Command, ctx: CliContext): void {
  for (const register of groups) register(program, ctx);
}
