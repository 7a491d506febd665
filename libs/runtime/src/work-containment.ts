/**
 * What keeps the agent's work from giving the host anything (docs/run.md, "Containment"):
 *
 *   - run directories private to the operator: ASSAY_HOME, `runs/` and each run's directory are 0700 and owned by the
 *     controller's user; a group- or other-accessible one is made private (and the log says so), one owned by someone
 *     else is refused (`RUN_HOME_UNSAFE`);
 *   - the agent never runs as root where its files reach the host: in split mode Work runs as the agent's user
 *     (`agentIdentity`: the controller's own uid when it is not root, else AGENT_UID), the workspace is handed to
 *     that user (`claimWorkspace`), and setuid/setgid bits are stripped from it after every snapshot and when the
 *     agent ends (`stripSetIdBits`); snapshots record no such bits anyway (only the execute bit);
 *   - the workspace is bounded by the task's storage (`mountBoundedWorkspace`: a loop-mounted ext4 file system of
 *     `storage_mb`, `nosuid,nodev`, for the controller session; copied back into `workspace/` when it ends);
 *   - Work stops when its controller dies (`openLifeline`): Work's first process reads a fifo that only the
 *     controller holds open for writing; when the controller dies, however it dies (SIGKILL included), the kernel
 *     closes that end, the read sees end-of-file, Work's first process exits and Docker stops every process in Work;
 *     a Work paused at that moment (its processes frozen, the lifeline's reader too) is killed from outside by the
 *     warden (`startWorkWarden`, work-warden.ts), a detached process holding the other end of a pipe from the
 *     controller.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  ftruncateSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { join } from 'node:path';
import { AssayError, workerEntry } from '@assay/core';

/** The uid and gid the agent runs as in Work when the controller runs as root (not 65534: the Judge's candidate). */
export const AGENT_UID = 10001;
export const AGENT_GID = 10001;

/** Where the lifeline fifo is, inside the run's `sock/` directory (mounted read-only at /run/assay in Work). */
export const LIFELINE_NAME = 'lifeline';
/** Work's first process: waits for end-of-file on the lifeline, then exits (and Work stops). */
export const LIFELINE_CMD = ['sh', '-c', 'while read -r _; do :; done < /run/assay/lifeline; exit 0'];

export interface Identity {
  readonly uid: number;
  readonly gid: number;
}

/** Who the agent runs as: the controller's own user when it is not root, else AGENT_UID:AGENT_GID. */
export function agentIdentity(): Identity {
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  return uid === 0 ? { uid: AGENT_UID, gid: AGENT_GID } : { uid, gid };
}

/**
 * Makes `dir` private to the controller's user (0700), creating it when missing. A directory someone else owns is
 * refused; one that group or others may enter is made private, and `log` says what it was.
 */
export function ensurePrivateDir(dir: string, what: string, log: (line: string) => void): void {
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = statSync(dir);
  const me = process.getuid?.() ?? 0;
  if (!st.isDirectory()) throw new AssayError('RUN_HOME_UNSAFE', 'refused', `${what} ${dir} is not a directory`, { details: { dir } });
  if (st.uid !== me)
    throw new AssayError(
      'RUN_HOME_UNSAFE',
      'refused',
      `${what} ${dir} is owned by uid ${st.uid}, not by the user running assay (uid ${me}); a run's files must be private to its operator: use an ASSAY_HOME you own`,
      {
        details: { dir, owner: st.uid, uid: me },
      },
    );
  const mode = st.mode & 0o7777;
  if (mode & 0o077) {
    chmodSync(dir, 0o700);
    log(
      `${what} ${dir} was accessible to ${mode & 0o070 ? 'its group' : ''}${mode & 0o070 && mode & 0o007 ? ' and ' : ''}${mode & 0o007 ? 'other users' : ''} (mode ${mode.toString(8).padStart(4, '0')}); made it private (0700)`,
    );
  }
}

/** Every entry under `dir` (not `dir` itself), depth first, without following symlinks. */
function* walk(dir: string): Generator<string> {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const n of names) {
    const p = join(dir, n);
    yield p;
    let st;
    try {
      st = lstatSync(p);
    } catch {
      continue;
    }
    if (st.isDirectory()) yield* walk(p);
  }
}

/**
 * Clears setuid and setgid bits under `dir` (files and directories; symlinks have none). Returns the paths changed,
 * relative to `dir`. Nothing is followed out of `dir`.
 */
export function stripSetIdBits(dir: string): string[] {
  const changed: string[] = [];
  for (const p of walk(dir)) {
    let st;
    try {
      st = lstatSync(p);
    } catch {
      continue;
    }
    if (st.isSymbolicLink() || !(st.mode & 0o6000)) continue;
    try {
      chmodSync(p, st.mode & 0o1777);
      changed.push(p.slice(dir.length + 1));
    } catch {
      /* gone meanwhile */
    }
  }
  return changed;
}

/**
 * Hands the workspace to the agent's user: every entry (and the directory itself) is lchown'ed to `id`, and
 * setuid/setgid bits are cleared. A no-op for ownership when the controller is not root (it already owns them).
 */
export function claimWorkspace(dir: string, id: Identity): { stripped: string[] } {
  const root = (process.getuid?.() ?? 0) === 0;
  if (root) {
    lchownSync(dir, id.uid, id.gid);
    for (const p of walk(dir)) {
      try {
        lchownSync(p, id.uid, id.gid);
      } catch {
        /* gone meanwhile */
      }
    }
  }
  return { stripped: stripSetIdBits(dir) };
}

/** The controller's end of the lifeline: closing it (or the controller's death) stops Work. */
export interface Lifeline {
  readonly path: string;
  close(): void;
}

/**
 * Creates `<sockDir>/lifeline` (a fifo, mode 0444: Work's user may read it and nobody but root may open it for
 * writing; the mount is read-only, so it cannot be changed from Work) and holds it open for writing for the
 * controller's life. Work's first process (LIFELINE_CMD) reads it until end-of-file.
 */
export function openLifeline(sockDir: string): Lifeline {
  const path = join(sockDir, LIFELINE_NAME);
  rmSync(path, { force: true });
  const r = spawnSync('mkfifo', ['-m', '0600', path], { encoding: 'utf8' });
  if (r.status !== 0)
    throw new AssayError(
      'RUN_LIFELINE_FAILED',
      'unavailable',
      `could not create the lifeline fifo ${path}: ${r.stderr || r.error?.message || `mkfifo exited ${r.status}`}`,
    );
  // O_RDWR: never blocks waiting for a reader (Linux), and the fd is close-on-exec: only this process holds it.
  const fd = openSync(path, constants.O_RDWR | constants.O_NONBLOCK);
  chmodSync(path, 0o444); // then nobody (the controller's user included) can open another writing end
  let open = true;
  return {
    path,
    close: () => {
      if (!open) return;
      open = false;
      closeSync(fd);
    },
  };
}

/** The controller's end of the warden's pipe: closing it (or the controller's death) kills Work from outside. */
export interface WorkWarden {
  readonly pid: number;
  close(): void;
}

/**
 * Starts the warden of the Work container `containerId` (work-warden.ts): a detached process that kills the container
 * when this controller ends, paused or not. The pipe's writing end and the child are unreferenced, so they never keep
 * the controller's event loop alive.
 */
export function startWorkWarden(containerId: string): WorkWarden {
  const { file, execArgv } = workerEntry(__dirname, 'work-warden');
  const child = spawn(process.execPath, [...execArgv, file, containerId], {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  child.on('error', () => undefined);
  child.stdin?.on('error', () => undefined);
  child.unref();
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  let open = true;
  return {
    pid: child.pid ?? -1,
    close: () => {
      if (!open) return;
      open = false;
      child.stdin?.destroy();
    },
  };
}

// ---- the workspace's size ----------------------------------------------------------------------------------------

/** A workspace bounded by a loop-mounted file system of the task's storage, for one controller session. */
export interface BoundedWorkspace {
  /** Where the agent's workspace lives while the controller runs (bind-mounted into Work, snapshotted). */
  readonly dir: string;
  /** Usable bytes of its file system. */
  readonly bytes: number;
  /** Copies the bounded workspace back into the run's `workspace/` directory, unmounts it and removes its image. */
  release(): void;
}

const WORKFS = 'workfs';
const WORKFS_IMG = 'workfs.img';

/** The system's own tools (mkfs.ext4, mount, umount) live in sbin, which a non-login PATH may lack: search there too. */
const SYSTEM_PATH = [process.env.PATH ?? '', '/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/bin', '/bin'].filter((p) => p !== '').join(':');

function run(cmd: string, args: string[]): { ok: boolean; why: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 10 * 60_000, env: { ...process.env, PATH: SYSTEM_PATH } });
  return { ok: r.status === 0, why: (r.stderr || r.error?.message || `${cmd} exited ${r.status}`).trim().slice(0, 300) };
}

function isMountPoint(dir: string): boolean {
  try {
    const info = readFileSync('/proc/self/mountinfo', 'utf8');
    const esc = dir.replace(/[\\ \t\n]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
    return info.split('\n').some((l) => l.split(' ')[4] === esc);
  } catch {
    return false;
  }
}

/** Replaces the contents of `dest` by those of `src` (owners, modes, links, holes kept), then clears set-id bits. */
function copyTree(src: string, dest: string): { ok: boolean; why: string } {
  for (const n of readdirSync(dest)) rmSync(join(dest, n), { recursive: true, force: true });
  const r = run('cp', ['-a', '--sparse=always', '--no-target-directory', `${src}/.`, dest]);
  stripSetIdBits(dest);
  return r;
}

/**
 * A bounded workspace left by a controller that died (still mounted, or only its image after a reboot): its contents
 * are the latest, so they are copied back into `workspace/` before anything else, and it is removed.
 */
export function recoverBoundedWorkspace(runDir: string, workspace: string, log: (line: string) => void): void {
  const mnt = join(runDir, WORKFS);
  const img = join(runDir, WORKFS_IMG);
  if (!isMountPoint(mnt) && existsSync(img)) {
    mkdirSync(mnt, { recursive: true, mode: 0o700 });
    const m = run('mount', ['-o', 'loop,nosuid,nodev', img, mnt]);
    if (!m.ok) log(`the bounded workspace ${img} of the previous session could not be mounted (${m.why}); its changes since the last copy are lost`);
  }
  if (isMountPoint(mnt)) {
    const c = copyTree(mnt, workspace);
    log(
      c.ok
        ? `copied the previous session's bounded workspace back into ${workspace}`
        : `copying the previous session's bounded workspace back failed: ${c.why}`,
    );
    run('umount', [mnt]);
  }
  if (!isMountPoint(mnt)) {
    rmSync(img, { force: true });
    rmSync(mnt, { recursive: true, force: true });
  }
}

/** Why a workspace could not be bounded this session (mountBoundedWorkspace). */
export interface UnboundedWorkspace {
  readonly unbounded: string;
}

/**
 * Bounds the workspace by the task's storage: a sparse file of `bytes` (plus the file system's own overhead) under
 * the run directory, formatted ext4 and loop-mounted `nosuid,nodev` at `<run>/workfs` for this controller session;
 * the workspace is copied in (holes kept), handed to the agent's user and bind-mounted into Work from there. The
 * agent can write no more than `bytes` into it, and a setuid bit in it means nothing on the host. Needs root (mount)
 * and mkfs.ext4; without them the workspace stays an unbounded directory and the answer says why (the run is then
 * refused unless the operator allowed an unbounded workspace).
 */
export function mountBoundedWorkspace(
  runDir: string,
  workspace: string,
  bytes: number,
  id: Identity,
  log: (line: string) => void,
): BoundedWorkspace | UnboundedWorkspace {
  if ((process.getuid?.() ?? 0) !== 0) return { unbounded: 'mounting its file system needs root (the controller runs as another user)' };
  const mnt = join(runDir, WORKFS);
  const img = join(runDir, WORKFS_IMG);
  if (isMountPoint(mnt)) return { unbounded: `${mnt} is still mounted (busy) from an earlier session; unmount it by hand` };
  const imgBytes = Math.ceil((bytes * 1.06 + 8 * 1048576) / 1048576) * 1048576; // ext4's own metadata
  const fd = openSync(img, 'w', 0o600);
  try {
    ftruncateSync(fd, imgBytes);
  } finally {
    closeSync(fd);
  }
  const steps: Array<[string, string[]]> = [
    ['mkfs.ext4', ['-q', '-F', '-m', '0', '-E', `root_owner=${id.uid}:${id.gid}`, img]],
    ['mount', ['-o', 'loop,nosuid,nodev', img, mnt]],
  ];
  mkdirSync(mnt, { recursive: true, mode: 0o700 });
  for (const [cmd, args] of steps) {
    const r = run(cmd, args);
    if (!r.ok) {
      if (cmd === 'mount') rmSync(mnt, { recursive: true, force: true });
      rmSync(img, { force: true });
      return { unbounded: `${cmd} failed (${r.why})` };
    }
  }
  rmSync(join(mnt, 'lost+found'), { recursive: true, force: true });
  const c = run('cp', ['-a', '--sparse=always', '--no-target-directory', `${workspace}/.`, mnt]);
  if (!c.ok) {
    run('umount', [mnt]);
    rmSync(img, { force: true });
    rmSync(mnt, { recursive: true, force: true });
    throw new AssayError(
      'RUN_WORKSPACE_TOO_LARGE',
      'refused',
      `the workspace ${workspace} does not fit the task's storage_mb (${Math.round(bytes / 1048576)} MiB): ${c.why}`,
      { details: { workspace, bytes } },
    );
  }
  claimWorkspace(mnt, id);
  let released = false;
  return {
    dir: mnt,
    bytes,
    release: () => {
      if (released) return;
      released = true;
      const back = copyTree(mnt, workspace);
      if (!back.ok) log(`copying the bounded workspace back into ${workspace} failed (${back.why}); it stays in ${img}`);
      const u = run('umount', [mnt]);
      if (u.ok && back.ok) {
        rmSync(img, { force: true });
        rmSync(mnt, { recursive: true, force: true });
      }
    },
  };
}
