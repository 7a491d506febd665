/**
 * The Judge as a NestJS module: binds the Judge's ports and host settings (JUDGE_BINDING) and the owner registry
 * (JUDGE_OWNERS: the process adapter unless given), and provides JudgeComposer, which composes a JudgeRunner and a
 * TaskImageBuilder over them with the container runtime (CONTAINER_RUNTIME), the Clock (CLOCK) and the ids
 * (ID_GENERATOR) of the modules it imports. The adapters for the recorder and the snapshot store belong to libs the
 * Judge does not import (the ledger's signing keys, the store), so the importing module binds them through
 * `forRootAsync`: RuntimeModule does, over its LedgerModule and SnapshotsModule.
 */
import { Inject, Injectable, Module, type DynamicModule, type FactoryProvider, type ModuleMetadata } from '@nestjs/common';
import { CLOCK, ID_GENERATOR, type Clock, type IdGenerator, type Progress } from '@assay/core';
import { CONTAINER_RUNTIME, type ContainerRuntime } from '@assay/containers';
import { composeJudge, type ComposedJudge, type JudgeHostSettings, type JudgePorts } from '../application/judge-composition';
import { ProcessOwnerRegistry } from '../adapters/process-owner.adapter';
import type { OwnerRegistry } from '../ports/owner.port';

/** The binding of the Judge's ports (JudgeBinding). */
export const JUDGE_BINDING = Symbol('JUDGE_BINDING');
/** Who owns a Judge's leftovers (OwnerRegistry); ProcessOwnerRegistry by default. */
export const JUDGE_OWNERS = Symbol('JUDGE_OWNERS');

export interface JudgeBinding {
  /**
   * The recorder and the snapshot store, asked for when a command first judges or builds: a module that never
   * judges (a read-only query) opens neither. May throw (a home without the runtime or judge key).
   */
  readonly ports: () => Promise<Omit<JudgePorts, 'owners'>>;
  /** The host's settings, read when a Judge is composed (settings from the environment are checked then). */
  readonly host: () => JudgeHostSettings;
}

@Injectable()
export class JudgeComposer {
  constructor(
    @Inject(CONTAINER_RUNTIME) private readonly runtime: ContainerRuntime,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(ID_GENERATOR) private readonly ids: IdGenerator,
    @Inject(JUDGE_OWNERS) private readonly owners: OwnerRegistry,
    @Inject(JUDGE_BINDING) private readonly binding: JudgeBinding,
  ) {}

  /** A runner and an image builder over the bound ports, with this call's progress display. */
  async compose(o: { readonly progress?: Progress } = {}): Promise<ComposedJudge> {
    const ports = { ...(await this.binding.ports()), owners: this.owners };
    return composeJudge({ runtime: this.runtime, ports, clock: this.clock, ids: this.ids, host: this.binding.host(), ...o });
  }
}

export interface JudgeModuleOptions {
  /** Modules that export CONTAINER_RUNTIME, CLOCK, ID_GENERATOR and whatever `inject` names. */
  readonly imports: NonNullable<ModuleMetadata['imports']>;
  readonly inject?: FactoryProvider['inject'];
  /** The binding, from the injected providers. */
  readonly useFactory: (...deps: never[]) => JudgeBinding | Promise<JudgeBinding>;
  /** Default: ProcessOwnerRegistry (this host, pid and process start time). */
  readonly owners?: OwnerRegistry;
}

@Module({})
export class JudgeModule {
  static forRootAsync(o: JudgeModuleOptions): DynamicModule {
    return {
      module: JudgeModule,
      imports: o.imports,
      providers: [
        { provide: JUDGE_BINDING, inject: o.inject ?? [], useFactory: o.useFactory },
        { provide: JUDGE_OWNERS, useFactory: (): OwnerRegistry => o.owners ?? new ProcessOwnerRegistry() },
        JudgeComposer,
      ],
      exports: [JudgeComposer],
    };
  }
}
