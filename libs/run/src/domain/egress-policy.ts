/**
 * The egress allowlist of a Work container (docs/run.md, "Vendor agents and the egress proxy"): which
 * `CONNECT host:port` requests the controller's egress proxy lets through. Pure: the proxy (adapter) reads the request
 * line and the addresses a name resolves to, and asks these functions.
 *
 * Rules (every request is hostile):
 *  - only `CONNECT <authority> HTTP/1.0|1.1`; any other method, absolute-form (`GET http://...`) and origin-form
 *    targets are refused; the request line is exactly three parts separated by single spaces, printable ASCII;
 *  - the authority is `host:port` with nothing else: no userinfo (`@`), no path, query or fragment, no whitespace,
 *    a decimal port 1-65535 without leading zeros (a port is required);
 *  - a host name is compared in its canonical form: ASCII lowercase, one trailing dot removed, labels of
 *    `[a-z0-9-]` (or `_`), 1-63 characters, not starting or ending with `-`, at most 253 characters. Non-ASCII names
 *    are refused (an IDN must be sent as its `xn--` A-label, and is listed that way). A name whose last label is all
 *    digits, or that looks like a shorthand IPv4 form (`127.1`, `0x7f.1`, `2130706433`), is refused;
 *  - an IPv4 literal must be a strict dotted quad (no leading zeros); an IPv6 literal is bracketed (`[::1]:443`),
 *    without a zone; literals match only literals listed in the allowlist, compared in canonical form;
 *  - matching is exact: no wildcards, no suffix matching (`api.openai.com` does not allow `x.api.openai.com`, nor
 *    `api.openai.com.evil.test`), and the port must be one of the policy's ports.
 */

export interface EgressPolicy {
  /** Canonical host names or IP literals (IPv6 without brackets). */
  readonly hosts: readonly string[];
  readonly ports: readonly number[];
}

export type EgressHost =
  { readonly kind: 'name'; readonly host: string } | { readonly kind: 'ipv4'; readonly host: string } | { readonly kind: 'ipv6'; readonly host: string };

export interface EgressTarget {
  readonly host: EgressHost;
  readonly port: number;
  /** `host:port` (IPv6 bracketed), canonical: what is recorded and counted. */
  readonly key: string;
}

export type EgressDecision =
  | { readonly allow: true; readonly target: EgressTarget }
  | {
      readonly allow: false;
      /** 400 malformed request line or target, 405 not CONNECT, 403 not on the allowlist. */
      readonly status: 400 | 403 | 405;
      readonly reason: string;
      /** What the request asked for, cleaned for a log line (printable, bounded); never trusted. */
      readonly shown: string;
    };

const PRINTABLE = /^[\x21-\x7e]*$/;

/** A short, printable rendering of attacker-supplied text for logs (at most 120 characters). */
export function showUntrusted(s: string): string {
  const clean = s.replace(/[^\x21-\x7e]/g, '?');
  return clean.length > 120 ? `${clean.slice(0, 117)}...` : clean;
}

/** Strict dotted-quad IPv4 (`1.2.3.4`, no leading zeros); null otherwise. */
export function parseIpv4(s: string): number[] | null {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return null;
    const n = Number(p);
    if (n > 255) return null;
    out.push(n);
  }
  return out;
}

/** IPv6 text (no brackets, no zone) to its eight 16-bit groups; null when malformed. */
export function parseIpv6(s: string): number[] | null {
  if (s.length === 0 || s.length > 45 || !/^[0-9a-fA-F:.]+$/.test(s)) return null;
  let tail: number[] = [];
  let text = s;
  const lastColon = s.lastIndexOf(':');
  if (s.includes('.')) {
    const v4 = parseIpv4(s.slice(lastColon + 1));
    if (!v4) return null;
    tail = [(v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!];
    text = s.slice(0, lastColon);
    if (text.endsWith(':')) text += ':'; // `::` right before the IPv4 part
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const group = (g: string): number | null => (/^[0-9a-fA-F]{1,4}$/.test(g) ? parseInt(g, 16) : null);
  const side = (h: string): number[] | null => {
    if (h === '') return [];
    const out: number[] = [];
    for (const g of h.split(':')) {
      const v = group(g);
      if (v === null) return null;
      out.push(v);
    }
    return out;
  };
  const want = 8 - tail.length;
  if (halves.length === 1) {
    const all = side(halves[0]!);
    if (!all || all.length !== want) return null;
    return [...all, ...tail];
  }
  const a = side(halves[0]!);
  const b = side(halves[1]!);
  if (!a || !b || a.length + b.length >= want) return null;
  return [...a, ...new Array<number>(want - a.length - b.length).fill(0), ...b, ...tail];
}

/** RFC 5952 text of eight groups: lowercase, longest run (≥ 2) of zero groups as `::`. */
export function formatIpv6(g: readonly number[]): string {
  let best = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/** Canonical form of a host (name, IPv4 or IPv6 literal; IPv6 with or without brackets); null when not acceptable. */
export function normaliseHost(raw: string): EgressHost | null {
  if (raw.length === 0 || raw.length > 255 || !PRINTABLE.test(raw)) return null;
  if (raw.startsWith('[') || raw.includes(':')) {
    const inner = raw.startsWith('[') ? (raw.endsWith(']') ? raw.slice(1, -1) : null) : raw;
    if (inner === null || inner.includes('%')) return null;
    const g = parseIpv6(inner);
    return g ? { kind: 'ipv6', host: formatIpv6(g) } : null;
  }
  const v4 = parseIpv4(raw);
  if (v4) return { kind: 'ipv4', host: v4.join('.') };
  let name = raw.toLowerCase();
  if (name.endsWith('.')) name = name.slice(0, -1);
  if (name.length === 0 || name.length > 253) return null;
  const labels = name.split('.');
  for (const l of labels) {
    if (!/^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/.test(l)) return null;
  }
  // numeric-looking names are IPv4 in other notations (WHATWG URL): never names
  const last = labels[labels.length - 1]!;
  if (/^[0-9]+$/.test(last) || /^0x[0-9a-f]*$/.test(last)) return null;
  return { kind: 'name', host: name };
}

/** `host:port` / `[v6]:port` (authority-form, nothing else); null when malformed. */
export function parseAuthority(target: string): EgressTarget | null {
  if (target.length === 0 || target.length > 300 || !PRINTABLE.test(target)) return null;
  if (/[@/?#\\]/.test(target)) return null;
  let hostText: string;
  let portText: string;
  if (target.startsWith('[')) {
    const close = target.indexOf(']');
    if (close < 0 || target[close + 1] !== ':') return null;
    hostText = target.slice(0, close + 1);
    portText = target.slice(close + 2);
  } else {
    const colon = target.lastIndexOf(':');
    if (colon < 0 || target.indexOf(':') !== colon) return null; // a bare IPv6 literal must be bracketed
    hostText = target.slice(0, colon);
    portText = target.slice(colon + 1);
  }
  if (!/^[1-9][0-9]{0,4}$/.test(portText)) return null;
  const port = Number(portText);
  if (port > 65535) return null;
  const host = normaliseHost(hostText);
  if (!host) return null;
  return { host, port, key: `${host.kind === 'ipv6' ? `[${host.host}]` : host.host}:${port}` };
}

/** Builds a policy from an allowlist rule; throws on entries that are not acceptable hosts or ports (operator input). */
export function egressPolicy(hosts: readonly string[], ports: readonly number[]): EgressPolicy {
  const out: string[] = [];
  for (const h of hosts) {
    const n = normaliseHost(h);
    if (!n) throw new Error(`egress allowlist: "${showUntrusted(h)}" is not a host name or IP literal`);
    if (!out.includes(n.host)) out.push(n.host);
  }
  for (const p of ports) if (!Number.isInteger(p) || p < 1 || p > 65535) throw new Error(`egress allowlist: port ${p} is not 1-65535`);
  if (out.length === 0 || ports.length === 0) throw new Error('egress allowlist: at least one host and one port are needed');
  return { hosts: out, ports: [...new Set(ports)] };
}

/** Whether a parsed target is allowed by the policy. */
export function allows(policy: EgressPolicy, t: EgressTarget): boolean {
  return policy.ports.includes(t.port) && policy.hosts.includes(t.host.host);
}

/** Decides one proxy request from its request line (`CONNECT host:port HTTP/1.1`). */
export function decideConnect(policy: EgressPolicy, requestLine: string): EgressDecision {
  const shown = showUntrusted(requestLine);
  const parts = requestLine.split(' ');
  if (parts.length !== 3 || !PRINTABLE.test(parts.join(''))) return { allow: false, status: 400, reason: 'malformed request line', shown };
  const [method, target, version] = parts as [string, string, string];
  if (version !== 'HTTP/1.1' && version !== 'HTTP/1.0') return { allow: false, status: 400, reason: 'not HTTP/1.x', shown };
  if (method !== 'CONNECT')
    return { allow: false, status: 405, reason: 'only CONNECT host:port is served (HTTPS through a tunnel)', shown: showUntrusted(`${method} ${target}`) };
  const t = parseAuthority(target);
  if (!t)
    return { allow: false, status: 400, reason: 'the CONNECT target must be host:port (no userinfo, path or IP shorthand)', shown: showUntrusted(target) };
  if (!allows(policy, t)) return { allow: false, status: 403, reason: `${t.key} is not on this run's egress allowlist`, shown: t.key };
  return { allow: true, target: t };
}

/**
 * Whether an address a name resolved to is public: loopback, private, link-local, CGNAT, multicast, reserved and
 * unspecified addresses (and IPv4-mapped forms of them) are not. The proxy refuses a listed *name* that resolves to
 * one of them unless told otherwise (tests; a listed IP literal is taken as the operator wrote it).
 */
export function isPublicAddress(address: string): boolean {
  const v4 = parseIpv4(address);
  if (v4) {
    const [a, b] = v4 as [number, number, number, number];
    if (a === 0 || a === 10 || a === 127 || a >= 224) return false;
    if (a === 100 && b >= 64 && b <= 127) return false;
    if (a === 169 && b === 254) return false;
    if (a === 172 && b >= 16 && b <= 31) return false;
    if (a === 192 && b === 168) return false;
    if (a === 192 && b === 0 && v4[2] === 0) return false;
    if (a === 198 && (b === 18 || b === 19)) return false;
    return true;
  }
  const g = parseIpv6(address);
  if (!g) return false;
  if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) {
    if (g[5] === 0 && g[6] === 0 && (g[7] === 0 || g[7] === 1)) return false; // :: and ::1
    return isPublicAddress(`${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`);
  }
  const first = g[0]!;
  if ((first & 0xfe00) === 0xfc00) return false; // fc00::/7 unique local
  if ((first & 0xffc0) === 0xfe80) return false; // fe80::/10 link-local
  if ((first & 0xff00) === 0xff00) return false; // multicast
  if (first === 0x2001 && g[1] === 0x0db8) return false; // documentation
  if (first === 0x0064 && g[1] === 0xff9b) return isPublicAddress(`${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`); // NAT64
  return true;
}
