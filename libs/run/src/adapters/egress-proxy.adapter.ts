/**
 * The egress proxy of a run (docs/run.md, "Vendor agents and the egress proxy"): HTTP CONNECT only, on a Unix
 * socket (never TCP) that is mounted into Work; TLS passes through untouched (the proxy never sees a key or a byte
 * of the agent's traffic in clear). Each request is decided by the pure allowlist (`decideConnect`): refused ones get
 * 400/403/405 and no name is resolved and no connection attempted; allowed ones are resolved by the controller
 * (Work has no DNS), checked (a listed name that resolves to a loopback/private address is refused unless
 * `allowNonPublicAddresses`), connected, answered `200 Connection Established`, and relayed both ways.
 *
 * Bounds: request head at most `maxHeaderBytes` (8 KiB) and 64 header lines, within `headerTimeoutMs` (10 s);
 * `maxTunnels` (32) connections at a time, beyond that 503; upstream connect within `connectTimeoutMs` (15 s), else
 * 504 (502 when it fails); a tunnel idle in both directions for `idleTimeoutMs` (5 min) is closed. Counts per
 * target are kept for at most 200 distinct targets (the rest under `(other)`).
 */
import * as dns from 'node:dns';
import * as net from 'node:net';
import { listenOnSocket, removeSocketFile } from './unix-socket';
import { decideConnect, isPublicAddress, showUntrusted, type EgressPolicy, type EgressTarget } from '../domain/egress-policy';

export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

export type EgressLookup = (host: string) => Promise<readonly ResolvedAddress[]>;

export interface EgressRecord {
  /** `allowed`: tunnel opened; `refused`: decided against (400/403/405/431/503); `failed`: allowed but upstream failed. */
  readonly outcome: 'allowed' | 'refused' | 'failed';
  readonly status: number;
  /** The canonical `host:port`, or the cleaned request text when it did not parse. Untrusted. */
  readonly target: string;
  readonly reason: string;
}

export interface EgressStats {
  readonly allowed: Record<string, number>;
  readonly refused: Record<string, number>;
  readonly failed: Record<string, number>;
  readonly bytesToUpstream: number;
  readonly bytesFromUpstream: number;
  readonly maxConcurrent: number;
}

export interface EgressProxyOptions {
  readonly socketPath: string;
  readonly policy: EgressPolicy;
  /** File mode of the socket (default 0o666, like the submit socket). */
  readonly mode?: number;
  /** Name resolution (default: the system resolver, all addresses). */
  readonly lookup?: EgressLookup;
  /** Let a listed name resolve to loopback/private addresses (tests). Default false. */
  readonly allowNonPublicAddresses?: boolean;
  readonly maxTunnels?: number;
  readonly maxHeaderBytes?: number;
  readonly headerTimeoutMs?: number;
  readonly connectTimeoutMs?: number;
  readonly idleTimeoutMs?: number;
  /** One call per request decided (for a log line; the caller redacts secrets before printing). */
  readonly onRecord?: (r: EgressRecord) => void;
}

const MAX_KEYS = 200;
const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  403: 'Forbidden',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

export const systemLookup: EgressLookup = async (host) => {
  const r = await dns.promises.lookup(host, { all: true, verbatim: true });
  return r.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

export class EgressProxy {
  private readonly active = new Set<net.Socket>();
  private counts = { allowed: new Map<string, number>(), refused: new Map<string, number>(), failed: new Map<string, number>() };
  private up = 0;
  private down = 0;
  private peak = 0;
  private concurrent = 0;

  private constructor(
    private readonly server: net.Server,
    private readonly o: EgressProxyOptions,
  ) {}

  get socketPath(): string {
    return this.o.socketPath;
  }

  static async listen(o: EgressProxyOptions): Promise<EgressProxy> {
    let proxy: EgressProxy | null = null;
    const server = net.createServer((c) => proxy?.accept(c));
    proxy = new EgressProxy(server, o);
    await listenOnSocket(server, o.socketPath, o.mode);
    return proxy;
  }

  stats(): EgressStats {
    const obj = (m: Map<string, number>) => Object.fromEntries([...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    return {
      allowed: obj(this.counts.allowed),
      refused: obj(this.counts.refused),
      failed: obj(this.counts.failed),
      bytesToUpstream: this.up,
      bytesFromUpstream: this.down,
      maxConcurrent: this.peak,
    };
  }

  /** Stops accepting, closes every tunnel, removes the socket file; returns the final counts. */
  async close(): Promise<EgressStats> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const s of this.active) s.destroy();
    });
    removeSocketFile(this.o.socketPath);
    return this.stats();
  }

  private count(outcome: EgressRecord['outcome'], target: string): void {
    const m = this.counts[outcome];
    const key = m.has(target) || m.size < MAX_KEYS ? target : '(other)';
    m.set(key, (m.get(key) ?? 0) + 1);
  }

  private record(r: EgressRecord): void {
    this.count(r.outcome, r.target);
    try {
      this.o.onRecord?.(r);
    } catch {
      // a logger must not break the proxy
    }
  }

  private track(s: net.Socket): void {
    this.active.add(s);
    s.once('close', () => this.active.delete(s));
  }

  private accept(client: net.Socket): void {
    this.track(client);
    client.on('error', () => client.destroy());
    const maxTunnels = this.o.maxTunnels ?? 32;
    if (this.concurrent >= maxTunnels) {
      this.refuse(client, 503, '(busy)', `more than ${maxTunnels} connections at a time`);
      return;
    }
    this.concurrent++;
    this.peak = Math.max(this.peak, this.concurrent);
    client.once('close', () => this.concurrent--);

    const maxHeader = this.o.maxHeaderBytes ?? 8192;
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => this.refuse(client, 408, '(slow)', 'the request head did not arrive in time'), this.o.headerTimeoutMs ?? 10_000);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) {
        if (buf.length > maxHeader) {
          clearTimeout(timer);
          client.off('data', onData);
          this.refuse(client, 431, '(oversized)', `request head over ${maxHeader} bytes`);
        }
        return;
      }
      clearTimeout(timer);
      client.off('data', onData);
      client.pause();
      if (end > maxHeader) return this.refuse(client, 431, '(oversized)', `request head over ${maxHeader} bytes`);
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      if (lines.length > 64) return this.refuse(client, 431, '(oversized)', 'more than 64 header lines');
      const d = decideConnect(this.o.policy, lines[0] ?? '');
      if (!d.allow) return this.refuse(client, d.status, d.shown, d.reason);
      void this.open(client, d.target, buf.subarray(end + 4));
    };
    client.on('data', onData);
    client.once('close', () => clearTimeout(timer));
  }

  private refuse(client: net.Socket, status: number, target: string, reason: string): void {
    this.record({ outcome: 'refused', status, target, reason });
    reply(client, status, `assay egress proxy: ${reason}\n`);
  }

  private async open(client: net.Socket, t: EgressTarget, early: Buffer): Promise<void> {
    let address: string;
    if (t.host.kind === 'name') {
      let addrs: readonly ResolvedAddress[];
      try {
        addrs = await (this.o.lookup ?? systemLookup)(t.host.host);
      } catch (e) {
        return this.fail(client, t, 502, `could not resolve ${t.host.host} (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
      }
      if (addrs.length === 0) return this.fail(client, t, 502, `${t.host.host} has no address`);
      if (!this.o.allowNonPublicAddresses && addrs.some((a) => !isPublicAddress(a.address))) {
        // refused, not failed: a listed name pointing at the controller's own networks is a policy matter
        this.record({ outcome: 'refused', status: 403, target: t.key, reason: `${t.host.host} resolves to a non-public address` });
        return reply(client, 403, `assay egress proxy: ${t.host.host} resolves to a non-public address\n`);
      }
      address = addrs[0]!.address;
    } else {
      address = t.host.host;
    }
    if (client.destroyed) return;
    const upstream = net.connect({ host: address, port: t.port });
    this.track(upstream);
    let settled = false;
    const connectTimer = setTimeout(() => {
      if (settled) return;
      settled = true;
      upstream.destroy();
      this.fail(client, t, 504, `no connection to ${t.key} within ${(this.o.connectTimeoutMs ?? 15_000) / 1000} s`);
    }, this.o.connectTimeoutMs ?? 15_000);
    upstream.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(connectTimer);
      if (!settled) {
        settled = true;
        this.fail(client, t, 502, `connection to ${t.key} failed (${e.code ?? 'error'})`);
      } else {
        client.destroy();
      }
    });
    client.once('close', () => {
      clearTimeout(connectTimer);
      upstream.destroy();
    });
    upstream.once('connect', () => {
      clearTimeout(connectTimer);
      if (settled) return;
      settled = true;
      this.record({ outcome: 'allowed', status: 200, target: t.key, reason: 'tunnel opened' });
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (early.length) {
        this.up += early.length;
        upstream.write(early);
      }
      const idle = this.o.idleTimeoutMs ?? 300_000;
      let last = Date.now();
      const touch = () => (last = Date.now());
      client.on('data', (c: Buffer) => {
        this.up += c.length;
        touch();
      });
      upstream.on('data', (c: Buffer) => {
        this.down += c.length;
        touch();
      });
      const check = setInterval(
        () => {
          if (Date.now() - last >= idle) {
            client.destroy();
            upstream.destroy();
          }
        },
        Math.min(idle, 10_000),
      );
      const stop = () => clearInterval(check);
      client.once('close', stop);
      upstream.once('close', () => {
        stop();
        client.destroy();
      });
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
  }

  private fail(client: net.Socket, t: EgressTarget, status: number, reason: string): void {
    this.record({ outcome: 'failed', status, target: t.key, reason });
    reply(client, status, `assay egress proxy: ${reason}\n`);
  }
}

function reply(client: net.Socket, status: number, body: string): void {
  if (client.destroyed) return;
  const text = `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  client.end(text);
  // do not wait for a hostile peer to read
  setTimeout(() => client.destroy(), 2000).unref();
}

/** One line for the run log: counts per target (untrusted names are already cleaned by the policy). */
export function egressSummary(s: EgressStats): string {
  const part = (m: Record<string, number>) =>
    Object.entries(m)
      .map(([k, v]) => `${showUntrusted(k)} ×${v}`)
      .join(', ') || 'none';
  return `egress: allowed ${part(s.allowed)}; refused ${part(s.refused)}; failed ${part(s.failed)}; ${s.bytesToUpstream} B out, ${s.bytesFromUpstream} B in`;
}
