/**
 * A controller to be killed: runs `runResearch` on the in-memory container runtime (tests/run/support/fake-run.ts)
 * whose agent submits once, then edits the workspace, prints `READY` and works on until the process is SIGKILLed.
 * Usage: fake-run-child.ts HOME TASK_DIR RUN
 */
import { runResearch } from '../../../libs/runtime/src/run-runtime';
import { fakeRun, submitFromWork } from './fake-run';

const [home, taskDir, run] = process.argv.slice(2) as [string, string, string];
const r = fakeRun(home, taskDir, run, async (p) => {
  p.writeFile('/workspace/solution.txt', 'first try\n');
  await submitFromWork(p);
  p.writeFile('/workspace/solution.txt', 'edited by the agent its controller left behind\n');
  process.stdout.write('READY\n');
  await p.sleep(3_600_000);
  return 0;
});
runResearch(r.options).then(
  () => process.stdout.write('ENDED\n'),
  (e: unknown) => {
    process.stderr.write(`${String((e as Error).stack ?? e)}\n`);
    process.exit(1);
  },
);
