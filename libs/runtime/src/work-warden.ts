/**
 * The Work warden: a process outside Work that kills it when its controller dies (docs/run.md, "Containment").
 *
 * Started by `startWorkWarden` as a detached child (a session of its own, so neither the controller's SIGKILL nor a
 * Ctrl-C to the controller's process group reaches it) with a pipe on stdin whose writing end only the controller
 * holds. When the controller ends, however it ends, the kernel closes that end; the warden reads end-of-file, kills
 * the Work container through the Docker API and exits. It is what stops a Work that is paused at that moment: the
 * lifeline inside Work (work-containment.ts) cannot, since a paused container's processes are frozen, and they
 * would stay frozen, holding the workspace and their memory, until a `--resume` killed them.
 *
 * Usage: node work-warden.js CONTAINER_ID. Quiet: it prints nothing and always exits 0.
 */
import Docker from 'dockerode';

async function killWork(id: string): Promise<void> {
  try {
    // SIGKILL reaches a paused container's processes too (the daemon thaws them to deliver it).
    await new Docker().getContainer(id).kill();
  } catch {
    // Already stopped or removed (the controller's own teardown got there first), or the daemon is gone.
  }
}

function main(): void {
  const id = process.argv[2] ?? '';
  if (!/^[0-9a-f]{12,64}$/.test(id)) process.exit(0);
  process.stdin.on('data', () => undefined);
  process.stdin.on('error', () => undefined);
  process.stdin.on('close', () => {
    void killWork(id).finally(() => process.exit(0));
  });
  process.stdin.resume();
}

main();
