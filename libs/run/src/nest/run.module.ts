/**
 * The research run as a NestJS module: binds the run's ports that a process shares (RUN_BINDING): the run ledger
 * (asked for when a run opens, so a module that never runs opens no ledger for it) and the host's GPU probes, and
 * provides them as RunPorts. The ports made per run (Work's WorkControl and Snapshotter, the Judge prepared for the
 * run's task, the submission endpoint) are bound by the runtime when a run starts (libs/runtime, `runResearch`). The
 * adapters of the shared ports belong to libs the run does not import (`nvidia-smi`, `docker info` in the runtime),
 * so the importing module binds them through `forRootAsync`: RuntimeModule does.
 */
import { Inject, Injectable, Module, type DynamicModule, type FactoryProvider, type ModuleMetadata } from '@nestjs/common';
import type { RunLedger } from '../ports/run-ledger.port';
import type { GpuProbe, GpuRuntimeCheck } from '../ports/gpu-host.port';

/** The binding of the run's shared ports (RunBinding). */
export const RUN_BINDING = Symbol('RUN_BINDING');

export interface RunBinding {
  /** Where runs' events live, asked for when a run opens; may throw (a home without a ledger). */
  readonly ledger: () => Promise<RunLedger>;
  /** The host's GPUs behind a GPU run's `--gpus` (docs/run.md, "GPUs"). */
  readonly gpuProbe: GpuProbe;
  /** Whether the container runtime can give containers NVIDIA GPUs (checked before a GPU run or task check starts). */
  readonly gpuRuntimeCheck: GpuRuntimeCheck;
}

/** The run's shared ports as the module bound them. */
@Injectable()
export class RunPorts {
  constructor(@Inject(RUN_BINDING) private readonly binding: RunBinding) {}

  ledger(): Promise<RunLedger> {
    return this.binding.ledger();
  }

  get gpuProbe(): GpuProbe {
    return this.binding.gpuProbe;
  }

  get gpuRuntimeCheck(): GpuRuntimeCheck {
    return this.binding.gpuRuntimeCheck;
  }
}

export interface RunModuleOptions {
  /** Modules that export whatever `inject` names. */
  readonly imports?: NonNullable<ModuleMetadata['imports']>;
  readonly inject?: FactoryProvider['inject'];
  /** The binding, from the injected providers. */
  readonly useFactory: (...deps: never[]) => RunBinding | Promise<RunBinding>;
}

@Module({})
export class RunModule {
  static forRootAsync(o: RunModuleOptions): DynamicModule {
    return {
      module: RunModule,
      imports: o.imports ?? [],
      providers: [{ provide: RUN_BINDING, inject: o.inject ?? [], useFactory: o.useFactory }, RunPorts],
      exports: [RunPorts],
    };
  }
}
