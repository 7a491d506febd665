/**
 * Full-rootfs mode on a real daemon: a paused container's whole file system is exported into the snapshot store
 * (Docker's and Assay's per-container paths left out), and a Judge of a workdir "/" task runs from an image made
 * from that snapshot, seeing the agent's changes and the freshly injected hidden tests and harness; the per-Judge
 * image is removed afterwards.
 */
import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { randomIds, systemClock } from '@assay/core';
import { initLedgerHome } from '@assay/ledger';
import { parseCid } from '@assay/snapshots';
import { ROOTFS_IMAGE_ROLE } from '@assay/judge';
import { ContainerSnapshotter, openJudgeRuntime, type JudgeRuntime, type LoadedTask } from '../../libs/runtime/src';
import { BASE_IMAGE, describeDocker } from '../support/docker';
import { tmp } from '../judge/judge-fakes';

const REPO = resolve(__dirname, '../..');
const TASK = join(REPO, 'tests/fixtures/tasks/rootfs-tiny');

jest.setTimeout(300_000);

describeDocker('full-rootfs snapshots and Judges (Docker)', () => {
  let home: string;
  let rt: JudgeRuntime;
  const containers: string[] = [];

  beforeAll(async () => {
    home = tmp('assay-rootfs-int-');
    await initLedgerHome(home, { clock: systemClock, ids: randomIds, origin: 'assay.test/rootfs-int' });
    rt = await openJudgeRuntime({ home });
    await rt.containers.ping();
  }, 60_000);

  afterAll(async () => {
    for (const c of containers) await rt.containers.removeContainer(c).catch(() => undefined);
    await rt?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  /** A long-running container from `image` with a few files written by a shell, like an agent in Work. */
  async function work(image: string, script: string): Promise<string> {
    const id = await rt.containers.createContainer({
      image,
      cmd: ['bash', '-c', `${script} && touch /ready && sleep 600`],
      entrypoint: [],
      env: {},
      labels: { 'org.assay.role': 'rootfs-int-test' },
      mounts: [{ type: 'tmpfs', target: '/scratch', sizeBytes: 1 << 20, mode: 0o755 }],
      networkMode: 'none',
      readOnlyRootfs: false,
      capDrop: ['ALL'],
      capAdd: ['DAC_OVERRIDE', 'CHOWN', 'FOWNER'],
      noNewPrivileges: true,
      pidsLimit: 64,
      memoryBytes: 256 * 1048576,
      nanoCpus: 1e9,
      init: true,
      openStdin: false,
    });
    containers.push(id);
    await rt.containers.start(id, { onOutput: () => undefined });
    for (let i = 0; i < 100; i++) {
      const a = await rt.containers.readArchive(id, '/ready');
      if (a) {
        for await (const _ of a) {
          /* drained, so the connection closes */
        }
        return id;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('the container did not get ready');
  }

  it('exports a paused container into a snapshot whose ls shows the files written, without /proc, /sys, /dev, /tmp', async () => {
    const id = await work(
      BASE_IMAGE,
      'mkdir -p /opt/proj && echo hi > /opt/proj/a.txt && printf "#!/bin/sh\\n" > /usr/local/bin/tool && chmod 755 /usr/local/bin/tool && ln -s /opt/proj/a.txt /root/link && echo t > /tmp/x && echo s > /scratch/y',
    );
    const docker = new (await import('dockerode')).default();
    await docker.getContainer(id).pause();
    let snap;
    try {
      snap = await new ContainerSnapshotter(rt.snapshotHome, rt.containers, () => id).snapshot({ run: 'r', round: 1 });
    } finally {
      await docker.getContainer(id).unpause();
    }
    const root = parseCid(snap.root);
    const top = (await rt.snapshotHome.ls(root)).entries.map((e) => e.name);
    expect(top).toEqual(expect.arrayContaining(['bin', 'etc', 'opt', 'root', 'usr']));
    for (const gone of ['proc', 'sys', 'dev', 'tmp', '.dockerenv']) expect(top).not.toContain(gone);
    // a mount point stays as the empty directory Docker made for it; what the tmpfs held is not exported
    expect((await rt.snapshotHome.ls(root, 'scratch')).entries).toEqual([]);
    const etc = (await rt.snapshotHome.ls(root, 'etc')).entries.map((e) => e.name);
    expect(etc).not.toContain('hostname');
    expect(etc).not.toContain('resolv.conf');
    expect(etc).toContain('passwd');
    expect((await rt.snapshotHome.ls(root, 'opt/proj')).entries).toEqual([expect.objectContaining({ name: 'a.txt', kind: 'file', size: 3 })]);
    expect((await rt.snapshotHome.ls(root, 'usr/local/bin/tool')).entries[0]).toMatchObject({ mode: '0755' });
    expect((await rt.snapshotHome.ls(root, 'root/link')).entries[0]).toMatchObject({ kind: 'symlink', target: '/opt/proj/a.txt' });
    expect(snap.files).toBeGreaterThan(1000);
    // the same container, unchanged, gives the same root again
    const again = await new ContainerSnapshotter(rt.snapshotHome, rt.containers, () => id).snapshot({ run: 'r', round: null });
    expect(again.root).toBe(snap.root);
    expect((await rt.snapshotHome.verify(root)).files).toBe(snap.files);
  });

  it('judges a workdir "/" task from an image made of the snapshot: the agent changes and the injected tests are seen', async () => {
    const t: LoadedTask = await rt.loadTask(TASK);
    expect(t.prepared.rootfs).toBe(true);
    // the agent edits a file outside any workspace and plants its own "harness" and "tests"
    const id = await work(
      t.images.work.id,
      'echo 42 > /etc/assay-answer && echo from-agent > /root/agent-marker && mkdir -p /opt/assay/judge && echo "exit 0" > /opt/assay/judge/entrypoint && mkdir -p /tests && echo fake > /tests/test.sh',
    );
    const snap = await new ContainerSnapshotter(rt.snapshotHome, rt.containers, () => id).snapshot({ run: 'r', round: 1 });
    const r = await rt.runner.judge(t.prepared, snap.root, { run: 'run-rootfs-int', round: 1 });
    const log = fs.readFileSync(r.output.path, 'utf8');
    expect({ status: r.status, score: r.primaryScore, detail: r.detail }).toEqual({ status: 'completed', score: 1, detail: null });
    expect(log).toContain('answer=42');
    expect(log).toContain('marker=from-agent');
    expect(log).toContain('tests=test.sh');
    expect(r.network).toBe('none');
    // the per-Judge image is gone, and so is every Judge container
    expect(await rt.containers.listImages({ 'org.assay.role': ROOTFS_IMAGE_ROLE, 'org.assay.judge': r.judge })).toEqual([]);
    expect(await rt.containers.listContainers({ 'org.assay.judge': r.judge })).toEqual([]);

    // the unchanged task image scores 0: the Judge really reads the snapshot's /etc
    const clean = await work(t.images.work.id, 'true');
    const snap0 = await new ContainerSnapshotter(rt.snapshotHome, rt.containers, () => clean).snapshot({ run: 'r', round: 2 });
    const r0 = await rt.runner.judge(t.prepared, snap0.root, { run: 'run-rootfs-int', round: 2 });
    expect([r0.status, r0.primaryScore]).toEqual(['completed', 0]);
  });
});
