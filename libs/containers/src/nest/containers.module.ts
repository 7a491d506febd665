/**
 * The container runtime as a NestJS module: binds the ContainerRuntime port (CONTAINER_RUNTIME) to the dockerode
 * adapter, or to the runtime the caller passes (tests pass the in-memory fake). RuntimeModule imports it; nothing
 * else in a process makes a Docker client.
 */
import { Module, type DynamicModule } from '@nestjs/common';
import { CONTAINER_RUNTIME, type ContainerRuntime } from '../container-runtime.port';
import { DockerodeRuntime } from '../adapters/dockerode-runtime.adapter';

@Module({})
export class ContainersModule {
  /** CONTAINER_RUNTIME bound to `containers` when given, else to a DockerodeRuntime on the default socket. */
  static forRuntime(containers?: ContainerRuntime): DynamicModule {
    return {
      module: ContainersModule,
      providers: [{ provide: CONTAINER_RUNTIME, useFactory: (): ContainerRuntime => containers ?? new DockerodeRuntime() }],
      exports: [CONTAINER_RUNTIME],
    };
  }
}
