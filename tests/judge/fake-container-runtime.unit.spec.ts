import { FakeContainerRuntime } from '../../libs/containers/src/testing';
import { containerRuntimeContract } from './container-runtime.contract';

containerRuntimeContract('in-memory fake', async () => {
  const runtime = new FakeContainerRuntime();
  const image = 'assay/base:bookworm';
  runtime.addImage({ tag: image });
  return {
    runtime,
    programs: {
      image,
      exit: (c) => ['fake-exit', String(c)],
      echo: (o, e) => ['fake-echo', o, e],
      catStdinTo: (p) => ['fake-cat-stdin-to', p],
      write: (p, c) => ['fake-write', p, c],
      sleep: (s) => ['fake-sleep', String(s)],
      flood: (n) => ['fake-flood', String(n)],
      interfaces: () => ['fake-net'],
    },
  };
});

describe('in-memory fake: a storage driver that can limit the writable layer', () => {
  it('applies the limit when storageQuota is on, refuses it (like overlay2 on ext4) when off', async () => {
    const runtime = new FakeContainerRuntime();
    runtime.addImage({ tag: 'assay/base:bookworm' });
    const spec = {
      image: 'assay/base:bookworm',
      cmd: ['fake-exit', '0'],
      env: {},
      labels: {},
      mounts: [],
      networkMode: 'none' as const,
      readOnlyRootfs: false,
      capDrop: ['ALL'],
      capAdd: [],
      noNewPrivileges: true,
      pidsLimit: 16,
      memoryBytes: null,
      nanoCpus: null,
      init: false,
      openStdin: false,
      rootfsSizeBytes: 8 * 1048576,
    };
    await expect(runtime.createContainer(spec)).rejects.toMatchObject({ code: 'CONTAINER_STORAGE_QUOTA_UNSUPPORTED' });
    runtime.storageQuota = true;
    const id = await runtime.createContainer(spec);
    expect((await runtime.inspectContainer(id))?.rootfsSizeBytes).toBe(8 * 1048576);
  });
});
