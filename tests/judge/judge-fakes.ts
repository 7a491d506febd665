/**
 * Fakes for judge unit tests: a directory-backed JudgeSnapshots, a memory ledger (real signing and schemas over
 * memory stores), owners whose liveness the test decides, temporary task directories, and a fake Judge entrypoint
 * program for FakeContainerRuntime that acts out a scenario written in the task's test.sh.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, SequentialIds } from '@assay/core';
import { readTar } from '@assay/containers';
import { FakeContainerRuntime, type FakeProcess } from '../../libs/containers/src/testing';
import { Ledger, MemoryCheckpointStore, MemoryEventStore, MemoryMerkleNodeStore, generateKeyPair, toSigningKey, type SigningKey } from '@assay/ledger';
import { JUDGE_ENTRYPOINT, LedgerJudgeRecorder, type JudgeSnapshots, type OwnerRegistry, type SnapshotEntry } from '@assay/judge';

export function tmp(prefix: string): string {
  return fs.mkdtempSync(join(tmpdir(), prefix));
}

const copies: string[] = [];

/** Removes the directories DirSnapshots made (call from afterAll). */
export function removeFakeSnapshots(): void {
  for (const d of copies.splice(0)) fs.rmSync(d, { recursive: true, force: true });
}

/** Snapshots as directories: the "CID" is a hash of the tree, materialising copies it. */
export class DirSnapshots implements JudgeSnapshots {
  readonly dirs = new Map<string, string>();
  materialised = 0;

  private hashTree(dir: string): string {
    const h = createHash('sha256');
    const walk = (d: string, rel: string) => {
      for (const n of fs.readdirSync(d).sort()) {
        const p = join(d, n);
        const r = rel ? `${rel}/${n}` : n;
        const st = fs.lstatSync(p);
        if (st.isSymbolicLink()) h.update(`l ${r} ${fs.readlinkSync(p)}\n`);
        else if (st.isDirectory()) {
          h.update(`d ${r}\n`);
          walk(p, r);
        } else h.update(`f ${r} ${createHash('sha256').update(fs.readFileSync(p)).digest('hex')}\n`);
      }
    };
    walk(dir, '');
    return `bfake${h.digest('hex')}`;
  }

  async snapshotDirectory(dir: string): Promise<string> {
    const cid = this.hashTree(dir);
    const copy = tmp('fake-snap-');
    copies.push(copy);
    fs.cpSync(dir, copy, { recursive: true, verbatimSymlinks: true });
    this.dirs.set(cid, copy);
    return cid;
  }

  async has(cid: string): Promise<boolean> {
    return this.dirs.has(cid);
  }

  async *walk(cid: string): AsyncIterable<SnapshotEntry> {
    const root = this.dirs.get(cid) as string;
    const rec = function* (d: string, rel: string): Generator<SnapshotEntry> {
      for (const n of fs.readdirSync(d).sort()) {
        const p = join(d, n);
        const r = rel ? `${rel}/${n}` : n;
        const st = fs.lstatSync(p);
        if (st.isSymbolicLink()) yield { path: r, kind: 'symlink', size: 0, target: fs.readlinkSync(p) };
        else if (st.isDirectory()) {
          yield { path: r, kind: 'dir', size: 0, target: null };
          yield* rec(p, r);
        } else yield { path: r, kind: 'file', size: st.size, target: null };
      }
    };
    yield* rec(root, '');
  }

  async materialise(cid: string, dest: string): Promise<{ files: number; bytes: number }> {
    this.materialised += 1;
    fs.cpSync(this.dirs.get(cid) as string, dest, { recursive: true, verbatimSymlinks: true });
    return { files: 0, bytes: 0 };
  }

  async digestDirectory(dir: string): Promise<string> {
    return this.hashTree(dir);
  }
}

export class TestOwners implements OwnerRegistry {
  readonly dead = new Set<string>();
  constructor(readonly self = 'host/100/1') {}
  isAlive(owner: string): boolean {
    return !this.dead.has(owner);
  }
}

export interface MemoryLedger {
  ledger: Ledger;
  /** The runtime's view: runtime and judge keys only. */
  recorder: LedgerJudgeRecorder;
  keys: SigningKey[];
  clock: ManualClock;
  ids: SequentialIds;
  /** type → role of the signer, per stream, in order. */
  stream(name: string): Promise<Array<{ type: string; signer: string; data: Record<string, unknown>; revision: number }>>;
}

export async function memoryLedger(): Promise<MemoryLedger> {
  const clock = new ManualClock('2026-12-01T10:00:00.000Z', 5);
  const ids = new SequentialIds();
  const keys = (['controller', 'runtime', 'judge'] as const).map((r) => toSigningKey(generateKeyPair(r)));
  const store = new MemoryEventStore();
  const merkle = new MemoryMerkleNodeStore();
  const checkpoints = new MemoryCheckpointStore();
  const root = new Ledger({ store, merkle, checkpoints, keys, clock, ids, origin: 'assay.test/judge' });
  await root.genesis();
  for (const k of keys.slice(1)) await root.registerKey(k);
  const runtimeLedger = new Ledger({ store, merkle, checkpoints, keys: keys.slice(1), clock, ids, origin: 'assay.test/judge' });
  return {
    ledger: root,
    recorder: new LedgerJudgeRecorder(runtimeLedger),
    keys,
    clock,
    ids,
    async stream(name) {
      const out: Array<{ type: string; signer: string; data: Record<string, unknown>; revision: number }> = [];
      for await (const e of store.readStream(name)) {
        const env = JSON.parse(Buffer.from(e.bytes).toString('utf8')) as { type: string; signer: string; data: Record<string, unknown>; revision: number };
        const role = keys.find((k) => k.signer === env.signer)?.role ?? '?';
        out.push({ type: env.type, signer: role, data: env.data, revision: env.revision });
      }
      return out;
    },
  };
}

/** A scenario for the fake entrypoint, written as `#fake {json}` on the first line of test.sh. */
export interface FakeScenario {
  files?: Record<string, string>;
  symlinks?: Record<string, string>;
  stdout?: string;
  floodBytes?: number;
  sleepMs?: number;
  exit?: number;
  oom?: boolean;
  setupFail?: string;
}

export function writeTask(dir: string, scenario: FakeScenario, o: { toml?: string; name?: string } = {}): string {
  fs.mkdirSync(join(dir, 'environment'), { recursive: true });
  fs.mkdirSync(join(dir, 'tests'), { recursive: true });
  fs.writeFileSync(join(dir, 'environment', 'Dockerfile'), 'FROM assay/base:bookworm\nWORKDIR /workspace\n');
  fs.writeFileSync(join(dir, 'instruction.md'), 'A fake task.\n');
  fs.writeFileSync(join(dir, 'tests', 'test.sh'), `#fake ${JSON.stringify(scenario)}\n`);
  fs.writeFileSync(
    join(dir, 'task.toml'),
    `schema_version = "1.4"\n[task]\nname = "${o.name ?? 'test/fake'}"\n[environment]\ncpus = 1\nmemory_mb = 64\ngpus = 0\nworkdir = "/workspace"\n` +
      `${o.toml?.includes('[verifier]') ? '' : '[verifier]\ntimeout_sec = 1\n'}${o.toml ?? ''}\n`,
  );
  return dir;
}

/** The fake Judge entrypoint: unpacks the tests from stdin into /tests, then acts out the scenario. */
export function installFakeEntrypoint(runtime: FakeContainerRuntime): void {
  runtime.defineProgram(JUDGE_ENTRYPOINT, async (p: FakeProcess) => {
    const tar = await p.stdin();
    async function* once() {
      yield tar;
    }
    for await (const r of readTar(once(), { maxArchiveBytes: 1 << 26, keep: () => 1 << 24 })) {
      if (r.header.type === 'file' && r.content) p.writeFile(`/tests/${r.header.path}`, r.content);
    }
    const script = p.readFile('/tests/test.sh').toString('utf8');
    const m = /^#fake (.*)$/m.exec(script);
    const s = JSON.parse(m?.[1] ?? '{}') as FakeScenario;
    if (s.setupFail) {
      p.write('stderr', `assay-judge-entrypoint: setup failed: ${s.setupFail}\n`);
      return 125;
    }
    if (p.list('/logs/verifier').length) {
      p.write('stderr', 'assay-judge-entrypoint: setup failed: /logs/verifier is not empty\n');
      return 125;
    }
    if (s.stdout) p.write('stdout', s.stdout);
    if (s.floodBytes) {
      const block = Buffer.alloc(65536, 0x79);
      for (let left = s.floodBytes; left > 0; left -= block.length) p.write('stdout', block.subarray(0, Math.min(left, block.length)));
    }
    for (const [name, content] of Object.entries(s.files ?? {})) p.writeFile(`/logs/verifier/${name}`, content);
    for (const [name, target] of Object.entries(s.symlinks ?? {})) p.symlink(target, `/logs/verifier/${name}`);
    if (s.oom) p.oom();
    if (s.sleepMs) await p.sleep(s.sleepMs);
    return s.exit ?? 0;
  });
}
