import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CONTROLLER_LOCK, acquireControllerLock, controllerLockState, systemProbe, type LockHolder, type ProcessProbe } from './controller-lock';

describe('one live controller per run (controller.lock)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'assay-lock-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const lockFile = (): string => join(dir, CONTROLLER_LOCK);
  const holder = (over: Partial<LockHolder>): LockHolder => ({
    host: systemProbe.host(),
    bootId: systemProbe.bootId(),
    pid: process.pid,
    startTicks: systemProbe.startTicks(process.pid) ?? null,
    since: '2026-12-02T10:00:00.000Z',
    ...over,
  });
  const plant = (h: LockHolder): void => writeFileSync(lockFile(), JSON.stringify(h));

  it('takes a free lock, names this process in it, and gives it back', () => {
    const lock = acquireControllerLock(dir);
    expect(lock.tookOver).toBeNull();
    const h = JSON.parse(readFileSync(lockFile(), 'utf8')) as LockHolder;
    expect(h).toMatchObject({ pid: process.pid, host: systemProbe.host() });
    lock.release();
    expect(existsSync(lockFile())).toBe(false);
  });

  it('reads whether a controller runs the run, without taking the lock', () => {
    expect(controllerLockState(dir)).toBe('none');
    const lock = acquireControllerLock(dir);
    expect(controllerLockState(dir)).toBe('alive');
    lock.release();
    plant(holder({ pid: 2 ** 22 + 1 })); // above pid_max: no such process
    expect(controllerLockState(dir)).toBe('gone');
    plant(holder({ bootId: 'another-boot' }));
    expect(controllerLockState(dir)).toBe(systemProbe.bootId() === null ? 'alive' : 'gone');
    plant(holder({ host: 'elsewhere.example' }));
    expect(controllerLockState(dir)).toBe('alive'); // another host: cannot be checked from here
    writeFileSync(lockFile(), 'not a lock');
    expect(controllerLockState(dir)).toBe('unknown');
    expect(existsSync(lockFile())).toBe(true);
  });

  it('refuses while the holder is alive, naming its pid', () => {
    const lock = acquireControllerLock(dir);
    expect(() => acquireControllerLock(dir)).toThrow(
      expect.objectContaining({ code: 'RUN_CONTROLLER_ALIVE', message: expect.stringContaining(`pid ${process.pid}`) }),
    );
    lock.release();
  });

  it('takes over from a controller that was killed, and a real child holding it keeps others out until it dies', async () => {
    const script = `const { acquireControllerLock } = require(${JSON.stringify(join(__dirname, 'controller-lock'))}); acquireControllerLock(${JSON.stringify(dir)}); process.stdout.write('held\\n'); setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['-r', join(__dirname, '..', '..', '..', 'tests', 'support', 'ts-register.js'), '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (b: Buffer) => (b.toString().includes('held') ? resolve() : undefined));
      child.once('exit', (code) => reject(new Error(`child exited ${code}`)));
    });
    expect(() => acquireControllerLock(dir)).toThrow(
      expect.objectContaining({ code: 'RUN_CONTROLLER_ALIVE', message: expect.stringContaining(`pid ${child.pid}`) }),
    );
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    const lock = acquireControllerLock(dir);
    expect(lock.tookOver?.pid).toBe(child.pid);
    lock.release();
  }, 30_000);

  it('takes over when the pid now belongs to another process, or the machine rebooted', () => {
    plant(holder({ startTicks: '1' }));
    expect(acquireControllerLock(dir).tookOver?.startTicks).toBe('1');
    rmSync(lockFile());
    plant(holder({ bootId: 'another-boot' }));
    expect(acquireControllerLock(dir).tookOver?.bootId).toBe('another-boot');
  });

  it('never takes over a lock from another host, and refuses a file it did not write', () => {
    plant(holder({ host: 'other-box', pid: 1 }));
    expect(() => acquireControllerLock(dir)).toThrow(/held by pid 1 on another host \(other-box\); if that controller is gone, remove/);
    writeFileSync(lockFile(), 'not json');
    expect(() => acquireControllerLock(dir)).toThrow(expect.objectContaining({ code: 'RUN_LOCK_UNREADABLE' }));
  });

  it('refuses when a second controller takes the stale lock over at the same moment', () => {
    plant(holder({ pid: 999_999, startTicks: null }));
    // A probe that, while the first one decides the lock is stale, lets a rival replace the file.
    let raced = false;
    const probe: ProcessProbe = {
      ...systemProbe,
      startTicks: (pid) => {
        if (pid === 999_999 && !raced) {
          raced = true;
          rmSync(lockFile());
          plant(holder({ pid: 4242, since: '2026-12-02T11:00:00.000Z' }));
          return null;
        }
        return systemProbe.startTicks(pid);
      },
    };
    expect(() => acquireControllerLock(dir, () => new Date(), probe)).toThrow(expect.objectContaining({ code: 'RUN_CONTROLLER_ALIVE' }));
    // The rival's lock is back in place, untouched.
    expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({ pid: 4242, since: '2026-12-02T11:00:00.000Z' });
  });

  it('release leaves a lock that another controller holds', () => {
    const lock = acquireControllerLock(dir);
    rmSync(lockFile());
    plant(holder({ pid: 4242 }));
    lock.release();
    expect(existsSync(lockFile())).toBe(true);
  });
});
