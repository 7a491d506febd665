/** Worker thread entry: runs checkChunk on chunks posted by the verifier. */
import { parentPort } from 'node:worker_threads';
import { checkChunk, type ChunkInput } from './check-chunk';

const keyCache = new Map<string, Uint8Array>();

parentPort?.on('message', (msg: { seq: number; input: ChunkInput }) => {
  try {
    const out = checkChunk(msg.input, keyCache);
    parentPort?.postMessage({ seq: msg.seq, out }, [out.digests.buffer as ArrayBuffer, out.signerIndex.buffer as ArrayBuffer]);
  } catch (e) {
    parentPort?.postMessage({ seq: msg.seq, error: e instanceof Error ? e.message : String(e) });
  }
});
