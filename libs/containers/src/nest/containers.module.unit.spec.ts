/** ContainersModule binds the ContainerRuntime port: to the runtime it is given, else to the dockerode adapter. */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { Module } from '@nestjs/common';
import { CONTAINER_RUNTIME } from '../container-runtime.port';
import { DockerodeRuntime } from '../adapters/dockerode-runtime.adapter';
import { FakeContainerRuntime } from '../adapters/fake-container-runtime.adapter';
import { ContainersModule } from './containers.module';

async function resolved(containers?: FakeContainerRuntime): Promise<unknown> {
  @Module({ imports: [ContainersModule.forRuntime(containers)] })
  class Root {}
  const app = await NestFactory.createApplicationContext(Root, { logger: false });
  try {
    return app.get(CONTAINER_RUNTIME);
  } finally {
    await app.close();
  }
}

describe('ContainersModule', () => {
  it('binds CONTAINER_RUNTIME to the runtime it is given', async () => {
    const fake = new FakeContainerRuntime();
    expect(await resolved(fake)).toBe(fake);
  });

  it('binds CONTAINER_RUNTIME to a DockerodeRuntime when given none (made without contacting a daemon)', async () => {
    expect(await resolved()).toBeInstanceOf(DockerodeRuntime);
  });
});
