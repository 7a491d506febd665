/**
 * The run's Unix domain sockets (the submission endpoint, the egress proxy): a stale socket left by a dead server
 * is replaced, a live one or anything that is not a socket is refused; the socket gets the mode given (default
 * 0666) once it listens, and its file is removed on close.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import { RUN_ERROR_CODES, runError } from '../run.errors';

function canConnect(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Removes a stale socket left by a dead server; refuses a live one or anything that is not a socket. */
export async function clearStaleSocket(path: string): Promise<void> {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  if (!st.isSocket()) throw runError(RUN_ERROR_CODES.SOCKET_IN_USE, 'refused', `${path} exists and is not a socket; refusing to replace it`, { path });
  if (await canConnect(path))
    throw runError(RUN_ERROR_CODES.SOCKET_IN_USE, 'conflict', `${path} is in use by a live server (another controller of this run?)`, { path });
  fs.unlinkSync(path);
}

/** Makes `server` listen on the Unix socket `path` (cleared first with clearStaleSocket) and gives it `mode`. */
export async function listenOnSocket(server: net.Server, path: string, mode = 0o666): Promise<void> {
  await clearStaleSocket(path);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  fs.chmodSync(path, mode);
}

/** Removes a closed server's socket file, if it is still there. */
export function removeSocketFile(path: string): void {
  try {
    fs.unlinkSync(path);
  } catch {
    // already gone
  }
}
