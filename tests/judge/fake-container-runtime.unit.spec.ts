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
