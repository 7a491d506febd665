/**
 * A hashing thread of HashPool: runs the kernel's jobs (hash-kernel.ts) for the main thread. Buffers whose whole
 * backing store a result owns are transferred, not copied; `recycle` hands a returned buffer back for reuse.
 */
import { parentPort } from 'node:worker_threads';
import { createHashKernel, type HashKernel } from './hash-kernel';

type Op = 'hashSmallFiles' | 'hashRange' | 'closePacks';
interface Request {
  id: number;
  op: Op | 'recycle';
  job: unknown;
}

const port = parentPort;
if (!port) throw new Error('hash.worker runs as a worker thread of HashPool');
const kernel: HashKernel = createHashKernel(true);

port.on('message', (m: Request) => {
  if (m.op === 'recycle') return kernel.recycle(m.job as ArrayBuffer);
  const op = m.op;
  Promise.resolve()
    .then(() => (kernel[op] as (job: unknown) => unknown)(m.job))
    .then(
      (result) => {
        const transfer: ArrayBuffer[] = [];
        for (const v of Object.values(result as Record<string, unknown>)) {
          if (ArrayBuffer.isView(v) && v.byteOffset === 0 && v.byteLength === v.buffer.byteLength && v.buffer instanceof ArrayBuffer) transfer.push(v.buffer);
        }
        port.postMessage({ id: m.id, ok: true, result }, transfer);
      },
      (e: unknown) => port.postMessage({ id: m.id, ok: false, message: String((e instanceof Error && e.stack) || e) }),
    );
});
