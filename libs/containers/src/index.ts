// Public entry of @assay/containers: the container runtime port, its dockerode adapter, the Nest module binding the
// port (ContainersModule), and a strict tar codec for what goes in and out of containers. The in-memory fake is in
// ./testing (tests only).
export * from './container-runtime.port';
export * from './containers.errors';
export * from './gpu-request';
export * from './tar/tar';
export { DockerodeRuntime, StreamDemuxer, type DockerodeRuntimeOptions } from './adapters/dockerode-runtime.adapter';
export { ContainersModule } from './nest/containers.module';
