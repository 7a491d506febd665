/**
 * The egress proxy on the host, with real sockets: CONNECT through its Unix socket to upstream servers on 127.0.0.1,
 * bytes both ways; refused requests never resolve a name nor open an upstream connection (counting servers on
 * loopback and a lookup that records every call prove it); bounds (head size, head time, tunnels, idle) and records.
 * Nothing leaves the machine: every upstream is on loopback and every name is resolved by the test's own lookup.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EgressProxy, egressPolicy, egressSummary, type EgressProxyOptions, type EgressRecord } from '@assay/run';

jest.setTimeout(30_000);

interface Upstream {
  port: number;
  connections: number;
  close(): Promise<void>;
}

/** A TCP server on 127.0.0.1 that counts connections, greets, and answers each chunk with `echo:<chunk>`. */
async function upstream(): Promise<Upstream> {
  const sockets = new Set<net.Socket>();
  const u: Upstream = { port: 0, connections: 0, close: async () => undefined };
  const server = net.createServer((s) => {
    u.connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    s.write('hello from upstream\n');
    s.on('data', (c) => s.write(`echo:${c.toString()}`));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  u.port = (server.address() as net.AddressInfo).port;
  u.close = () =>
    new Promise<void>((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
  return u;
}

interface Reply {
  status: number;
  head: string;
  sock: net.Socket;
  /** Bytes after the reply head, so far (and, for refusals, the whole body once closed). */
  rest: () => string;
  closed: Promise<void>;
}

/** Sends `raw` to the proxy socket and resolves with the reply head once it arrives. */
function request(socketPath: string, raw: string | Buffer): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(socketPath);
    let buf = Buffer.alloc(0);
    let done = false;
    const closed = new Promise<void>((r) => sock.once('close', () => r()));
    sock.on('error', (e) => (done ? undefined : reject(e)));
    sock.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      const end = buf.indexOf('\r\n\r\n');
      if (!done && end >= 0) {
        done = true;
        const head = buf.subarray(0, end).toString('latin1');
        resolve({ status: Number(head.split(' ')[1]), head, sock, rest: () => buf.subarray(end + 4).toString(), closed });
      }
    });
    sock.once('close', () => (done ? undefined : reject(new Error(`closed without a reply: ${buf.toString()}`))));
    sock.write(raw);
  });
}

async function until(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const t = Date.now();
  while (!cond()) {
    if (Date.now() - t > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('egress proxy (Unix socket, loopback upstreams)', () => {
  let dir: string;
  let up: Upstream;
  let other: Upstream;
  let proxy: EgressProxy | null = null;
  let lookups: string[];
  let records: EgressRecord[];
  const sockPath = () => join(dir, 'egress.sock');

  async function start(o: Partial<EgressProxyOptions> = {}): Promise<EgressProxy> {
    proxy = await EgressProxy.listen({
      socketPath: sockPath(),
      policy: egressPolicy(['127.0.0.1', 'upstream.assay.test', 'private.assay.test'], [up.port]),
      lookup: async (host) => {
        lookups.push(host);
        if (host === 'upstream.assay.test' || host === 'private.assay.test') return [{ address: '127.0.0.1', family: 4 }];
        throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      },
      onRecord: (r) => records.push(r),
      ...o,
    });
    return proxy;
  }

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'assay-egress-'));
    up = await upstream();
    other = await upstream();
    lookups = [];
    records = [];
  });

  afterEach(async () => {
    if (proxy) await proxy.close();
    proxy = null;
    await up.close();
    await other.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('CONNECT to a listed IP literal: 200, then bytes flow both ways (early bytes included)', async () => {
    await start();
    expect(statSync(sockPath()).mode & 0o777).toBe(0o666);
    const r = await request(sockPath(), `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\nearly`);
    expect(r.head).toBe('HTTP/1.1 200 Connection Established');
    await until(() => r.rest().includes('echo:early'), 'the early bytes echoed');
    r.sock.write('ping');
    await until(() => r.rest().includes('echo:ping'), 'the echo');
    expect(r.rest()).toMatch(/^hello from upstream\n/);
    r.sock.end();
    await r.closed;
    expect(up.connections).toBe(1);
    expect(lookups).toEqual([]); // a literal is not resolved
    const s = proxy!.stats();
    expect(s.allowed).toEqual({ [`127.0.0.1:${up.port}`]: 1 });
    expect(s.bytesToUpstream).toBe('early'.length + 'ping'.length);
    expect(s.bytesFromUpstream).toBeGreaterThanOrEqual('hello from upstream\n'.length + 'echo:early'.length + 'echo:ping'.length);
    expect(records).toEqual([{ outcome: 'allowed', status: 200, target: `127.0.0.1:${up.port}`, reason: 'tunnel opened' }]);
  });

  it('a listed name is resolved by the controller (the lookup) and connected', async () => {
    await start({ allowNonPublicAddresses: true });
    const r = await request(sockPath(), `CONNECT UPSTREAM.assay.test.:${up.port} HTTP/1.1\r\n\r\n`);
    expect(r.status).toBe(200);
    r.sock.write('x');
    await until(() => r.rest().includes('echo:x'), 'the echo');
    r.sock.destroy();
    expect(lookups).toEqual(['upstream.assay.test']);
    expect(up.connections).toBe(1);
  });

  it('a listed name that resolves to a loopback address is refused by default, and nothing is connected', async () => {
    await start();
    const r = await request(sockPath(), `CONNECT private.assay.test:${up.port} HTTP/1.1\r\n\r\n`);
    expect(r.status).toBe(403);
    await r.closed;
    expect(r.rest()).toMatch(/resolves to a non-public address/);
    expect(lookups).toEqual(['private.assay.test']);
    expect(up.connections).toBe(0);
  });

  it('non-listed targets get 403: no name resolved, no upstream connection attempted', async () => {
    await start();
    for (const target of [
      'api.openai.com:443',
      'never-resolved.assay.test:443',
      `127.0.0.1:${other.port}`,
      `localhost:${up.port}`,
      `upstream.assay.test:${other.port}`,
      `[::1]:${up.port}`,
    ]) {
      const r = await request(sockPath(), `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
      expect([target, r.status]).toEqual([target, 403]);
      await r.closed;
      expect(r.rest()).toMatch(/is not on this run's egress allowlist/);
    }
    expect(lookups).toEqual([]);
    expect(up.connections).toBe(0);
    expect(other.connections).toBe(0);
    expect(Object.keys(proxy!.stats().refused)).toEqual(
      expect.arrayContaining(['api.openai.com:443', 'never-resolved.assay.test:443', `127.0.0.1:${other.port}`, `localhost:${up.port}`, `[::1]:${up.port}`]),
    );
    expect(proxy!.stats().allowed).toEqual({});
  });

  it('absolute-form GET, userinfo tricks and malformed heads are refused without any connection', async () => {
    await start();
    const cases: Array<[string, number]> = [
      [`GET http://127.0.0.1:${up.port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, 405],
      [`CONNECT 127.0.0.1:${up.port}@evil.test:443 HTTP/1.1\r\n\r\n`, 400],
      [`CONNECT evil.test:443@127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`, 400],
      [`CONNECT user:pw@127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`, 400],
      [`CONNECT 127.0.0.1:${up.port} HTTP/2\r\n\r\n`, 400],
      ['\r\n\r\n', 400],
      [`CONNECT 127.1:${up.port} HTTP/1.1\r\n\r\n`, 400],
    ];
    for (const [raw, status] of cases) {
      const r = await request(sockPath(), raw);
      expect([raw, r.status]).toEqual([raw, status]);
      await r.closed;
    }
    expect(up.connections).toBe(0);
    expect(lookups).toEqual([]);
  });

  it('bounds: an oversized head is 431, a slow head 408, too many tunnels 503', async () => {
    await start({ maxHeaderBytes: 1024, headerTimeoutMs: 300, maxTunnels: 2 });
    const big = await request(sockPath(), `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nX: ${'a'.repeat(2000)}`);
    expect(big.status).toBe(431);
    await big.closed;
    const slow = await request(sockPath(), 'CONNECT 127.0.0.1');
    expect(slow.status).toBe(408);
    await slow.closed;
    // The tunnel count on a proxy of its own with the default head timeout: 300 ms is a slow head, but also a stall a
    // loaded machine can put between accepting a tunnel and reading its head.
    await proxy!.close();
    await start({ maxTunnels: 2 });
    const a = await request(sockPath(), `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`);
    const b = await request(sockPath(), `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`);
    expect([a.status, b.status]).toEqual([200, 200]);
    const c = await request(sockPath(), `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`);
    expect(c.status).toBe(503);
    a.sock.destroy();
    await a.closed;
    expect(proxy!.stats().maxConcurrent).toBe(2);
    let d = await request(sockPath(), `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`);
    for (let i = 0; d.status === 503 && i < 100; i++) {
      await new Promise((r) => setTimeout(r, 20)); // the proxy's side of the closed tunnel is still closing
      d = await request(sockPath(), `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`);
    }
    expect(d.status).toBe(200); // a slot freed
    b.sock.destroy();
    d.sock.destroy();
    expect(up.connections).toBe(3);
  });

  it('an idle tunnel is closed; an upstream that refuses is 502 (failed)', async () => {
    await start({ idleTimeoutMs: 300 });
    const r = await request(sockPath(), `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`);
    expect(r.status).toBe(200);
    const t = Date.now();
    await r.closed;
    expect(Date.now() - t).toBeGreaterThanOrEqual(250);

    const closedPort = other.port;
    await other.close();
    await proxy!.close();
    proxy = null;
    await start({ policy: egressPolicy(['127.0.0.1'], [closedPort]) });
    const f = await request(sockPath(), `CONNECT 127.0.0.1:${closedPort} HTTP/1.1\r\n\r\n`);
    expect(f.status).toBe(502);
    await f.closed;
    expect(f.rest()).toMatch(/ECONNREFUSED/);
    expect(proxy!.stats().failed).toEqual({ [`127.0.0.1:${closedPort}`]: 1 });
    expect(egressSummary(proxy!.stats())).toMatch(new RegExp(`failed 127\\.0\\.0\\.1:${closedPort} ×1`));
  });

  it('replaces a stale socket, refuses a regular file, and close() removes the socket', async () => {
    // a socket file left by a dead process (python binds and exits without unlinking)
    expect(spawnSync('python3', ['-c', 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])', sockPath()]).status).toBe(0);
    expect(statSync(sockPath()).isSocket()).toBe(true);
    writeFileSync(join(dir, 'not-a-socket'), 'x');
    await expect(EgressProxy.listen({ socketPath: join(dir, 'not-a-socket'), policy: egressPolicy(['127.0.0.1'], [1]) })).rejects.toThrow(/not a socket/);
    await start();
    expect(existsSync(sockPath())).toBe(true);
    const s = await proxy!.close();
    proxy = null;
    expect(existsSync(sockPath())).toBe(false);
    expect(s).toEqual({ allowed: {}, refused: {}, failed: {}, bytesToUpstream: 0, bytesFromUpstream: 0, maxConcurrent: 0 });
  });
});
