// Testing entry of @assay/containers: the in-memory fake of the container runtime port, for unit tests and the
// port's contract suite. Not exported from the public entry, so nothing that ships can construct it.
export { FakeContainerRuntime, FakeFsError, FAKE_BUILTINS, type FakeNode, type FakeProcess, type FakeProgram } from './adapters/fake-container-runtime.adapter';
export { SimulatedGpuDockerRuntime } from './adapters/simulated-gpu-runtime.adapter';
