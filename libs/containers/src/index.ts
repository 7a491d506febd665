// Public entry of @assay/containers: the container runtime port, its dockerode adapter and in-memory fake, and a
// strict tar codec for what goes in and out of containers.
export * from './container-runtime.port';
export * from './containers.errors';
export * from './gpu-request';
export * from './tar/tar';
export { DockerodeRuntime, StreamDemuxer, type DockerodeRuntimeOptions } from './adapters/dockerode-runtime.adapter';
export { FakeContainerRuntime, FakeFsError, FAKE_BUILTINS, type FakeNode, type FakeProcess, type FakeProgram } from './adapters/fake-container-runtime.adapter';
