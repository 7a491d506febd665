/**
 * The pure logic of Assay's web pages (no DOM): chart series, table sorting, group differences, the Server-Sent
 * Events parser, and the parsing and checking of inclusion proofs. UMD: the browser global `AssayWeb`, or
 * `module.exports` under Node (the unit tests).
 *
 * Everything here treats its input as hostile: values of unexpected types are ignored or refused, never evaluated,
 * and strings are returned as they came (inserting them into the page as text is the caller's job).
 */
(function (root, factory) {
  if (typeof module === 'object' && module && module.exports) module.exports = factory();
  else root.AssayWeb = factory();
})(typeof globalThis !== 'undefined' ? globalThis : this, function () {
  'use strict';

  const MAX_SAFE = Number.MAX_SAFE_INTEGER;

  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
  const isObj = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
  const isCount = (v) => Number.isSafeInteger(v) && v >= 0;

  // ---- formatting ------------------------------------------------------------------------------------------------

  const pad2 = (n) => (n < 10 ? '0' : '') + n;

  /** A duration in ms, for people: `350 ms`, `12.3 s`, `5m 07s`, `2h 03m 04s`, `1d 02h 03m`; `—` when not a number. */
  function formatMs(ms) {
    if (!isNum(ms)) return '—';
    if (ms < 0) return '-' + formatMs(-ms);
    if (ms < 1000) return `${Math.round(ms)} ms`;
    if (ms < 60000) {
      const s = Math.floor(ms / 100) / 10;
      return `${s.toFixed(1)} s`;
    }
    const total = Math.floor(ms / 1000);
    const d = Math.floor(total / 86400);
    const h = Math.floor((total % 86400) / 3600);
    const m = Math.floor((total % 3600) / 60);
    const s = total % 60;
    if (d > 0) return `${d}d ${pad2(h)}h ${pad2(m)}m`;
    if (h > 0) return `${h}h ${pad2(m)}m ${pad2(s)}s`;
    return `${m}m ${pad2(s)}s`;
  }

  /** A number with at most `digits` significant digits (exact integers as they are); `—` when not a number. */
  function formatNumber(n, digits) {
    if (!isNum(n)) return '—';
    if (Number.isInteger(n) && Math.abs(n) < 1e15) return String(n);
    return String(Number(n.toPrecision(digits || 6)));
  }

  /** A difference with its sign: `+0.25`, `-3`, `0`. */
  function formatSigned(n, digits) {
    if (!isNum(n)) return '—';
    const s = formatNumber(n, digits);
    return n > 0 ? '+' + s : s;
  }

  /** A ratio as a signed percentage: 0.125 → `+12.5%`. */
  function formatPercent(r) {
    if (!isNum(r)) return '—';
    return formatSigned(r * 100, 3) + '%';
  }

  /**
   * A content id shortened to its first `head` and last `tail` characters (by code point, so a surrogate pair is
   * never split): `bafybeigdy…a3x4zq`. Short ones, and non-strings turned to text, come back whole; null is `—`.
   */
  function shortCid(cid, head, tail) {
    if (cid === null || cid === undefined) return '—';
    const s = typeof cid === 'string' ? cid : String(cid);
    const h = head === undefined ? 10 : head;
    const t = tail === undefined ? 6 : tail;
    const cps = Array.from(s);
    if (cps.length <= h + t + 1) return s;
    return cps.slice(0, h).join('') + '…' + cps.slice(cps.length - t).join('');
  }

  /** A CSS class for a status word: `status-<word>` for plain lowercase words, `status-other` for anything else. */
  function statusClass(status) {
    return typeof status === 'string' && /^[a-z][a-z_]{0,39}$/.test(status) ? 'status-' + status.replace(/_/g, '-') : 'status-other';
  }

  /** Where the API is, from the page's path: the part before `/ui/` (`''` when the UI is at the root's `/ui/`). */
  function apiBase(pathname) {
    const p = typeof pathname === 'string' ? pathname : '';
    const i = p.lastIndexOf('/ui/');
    return i < 0 ? '' : p.slice(0, i);
  }

  // ---- the trajectory chart ----------------------------------------------------------------------------------------

  const INVALID = 'submission_error';
  const VIOLATING = 'rule_violation';
  const FAILED = ['verifier_error', 'verifier_timeout'];

  /**
   * The uPlot data of a trajectory: `data` = [x, score, best, invalid, violating, failed], where x is the time since
   * the run's start in seconds (ascending), score the round's score (null when it has none; a rule violation's
   * forced 0 is not a score), best the best eligible score so far (the server's `bestSoFar` when the round has one,
   * else recomputed from eligible scores under the run's direction), and the last three marker series hold 0 at the
   * rounds of that kind (submission_error; rule_violation; verifier_error or verifier_timeout) and null elsewhere,
   * to be drawn at the bottom of the plot on a scale of their own. `rounds[i]` is the round at index i. When the run
   * has completed after its last round, one more point at the completion time carries the best score on (the end
   * of the staircase); its `rounds` entry is null.
   */
  function trajectorySeries(trajectory) {
    const t = isObj(trajectory) ? trajectory : {};
    const direction = t.direction === 'minimize' ? 'minimize' : 'maximize';
    const t0 = typeof t.startedAt === 'string' ? Date.parse(t.startedAt) : NaN;
    const list = Array.isArray(t.rounds) ? t.rounds.filter(isObj) : [];
    const elapsedOf = (r) => {
      if (isNum(r.elapsedMs)) return Math.max(0, r.elapsedMs);
      const at = typeof r.at === 'string' ? Date.parse(r.at) : NaN;
      return Number.isFinite(at) && Number.isFinite(t0) ? Math.max(0, at - t0) : null;
    };
    let last = 0;
    const keyed = list.map((r, i) => {
      const e = elapsedOf(r);
      last = e === null ? last : e;
      return { r, i, e: e === null ? last : e, n: isNum(r.round) ? r.round : i };
    });
    keyed.sort((a, b) => a.e - b.e || a.n - b.n || a.i - b.i);
    const x = [];
    const score = [];
    const best = [];
    const invalid = [];
    const violating = [];
    const failed = [];
    const rounds = [];
    let running = null;
    let shown = null;
    for (const { r, e } of keyed) {
      const s = r.status === VIOLATING ? null : isNum(r.score) ? r.score : null;
      if (r.eligible === true && s !== null && (running === null || (direction === 'maximize' ? s > running : s < running))) running = s;
      const b = Object.prototype.hasOwnProperty.call(r, 'bestSoFar') ? (isNum(r.bestSoFar) ? r.bestSoFar : null) : running;
      shown = b;
      x.push(e / 1000);
      score.push(s);
      best.push(b);
      invalid.push(r.status === INVALID ? 0 : null);
      violating.push(r.status === VIOLATING ? 0 : null);
      failed.push(FAILED.includes(r.status) ? 0 : null);
      rounds.push(r);
    }
    const end = typeof t.completedAt === 'string' ? Date.parse(t.completedAt) - t0 : NaN;
    if (x.length > 0 && Number.isFinite(end) && end / 1000 > x[x.length - 1]) {
      x.push(end / 1000);
      score.push(null);
      best.push(shown);
      invalid.push(null);
      violating.push(null);
      failed.push(null);
      rounds.push(null);
    }
    return { data: [x, score, best, invalid, violating, failed], rounds, direction };
  }

  // ---- table sorting ---------------------------------------------------------------------------------------------

  /** The value at a dotted path (`best.score`); undefined when any step is missing. Own properties only. */
  function getPath(obj, path) {
    let v = obj;
    for (const k of String(path).split('.')) {
      if (!isObj(v) || !Object.prototype.hasOwnProperty.call(v, k)) return undefined;
      v = v[k];
    }
    return v;
  }

  const missing = (v) => v === null || v === undefined || (typeof v === 'number' && Number.isNaN(v));

  /** Numbers numerically (before any text), booleans as 0/1, everything else as text (natural order, then exact). */
  function compareValues(a, b) {
    const na = typeof a === 'number' || typeof a === 'boolean';
    const nb = typeof b === 'number' || typeof b === 'boolean';
    if (na && nb) return Number(a) - Number(b);
    if (na !== nb) return na ? -1 : 1;
    const sa = typeof a === 'string' ? a : JSON.stringify(a);
    const sb = typeof b === 'string' ? b : JSON.stringify(b);
    const c = sa.localeCompare(sb, 'en', { numeric: true, sensitivity: 'base' });
    if (c !== 0) return c;
    return sa < sb ? -1 : sa > sb ? 1 : 0;
  }

  /**
   * A sorted copy of `rows` by `key` (a dotted path, or a function of the row), `dir` `asc` or `desc`. Numbers
   * sort numerically, text as text; null, undefined and NaN come last in either direction; ties keep their order.
   */
  function sortRows(rows, key, dir) {
    const list = Array.isArray(rows) ? rows : [];
    const get = typeof key === 'function' ? key : (r) => getPath(r, key);
    const sign = dir === 'desc' ? -1 : 1;
    const decorated = list.map((row, i) => {
      let v;
      try {
        v = get(row);
      } catch (_e) {
        v = undefined;
      }
      return { row, i, v };
    });
    decorated.sort((a, b) => {
      const ma = missing(a.v);
      const mb = missing(b.v);
      if (ma || mb) return ma && mb ? a.i - b.i : ma ? 1 : -1;
      const c = compareValues(a.v, b.v);
      return c !== 0 ? sign * c : a.i - b.i;
    });
    return decorated.map((d) => d.row);
  }

  // ---- leaderboard groups ----------------------------------------------------------------------------------------

  const GROUP_FIELDS = [
    ['task', 'task'],
    ['taskDigest', 'task digest'],
    ['fingerprint', 'protocol fingerprint'],
    ['metric', 'metric'],
    ['direction', 'direction'],
  ];

  const show = (v) => (v === null || v === undefined ? 'none' : typeof v === 'string' ? shortCid(v, 16, 8) : JSON.stringify(v));

  /**
   * What sets the leaderboard's groups apart, as sentences: for each group after the first, what differs from the
   * first group (task, task digest, protocol fingerprint, metric, direction); and, for any group, a run whose row
   * records another metric or direction than its group ranks by. Empty with fewer than two groups and no such run.
   */
  function groupDifferences(groups) {
    const list = Array.isArray(groups) ? groups.filter(isObj) : [];
    const out = [];
    const first = list[0];
    list.forEach((g, i) => {
      if (i > 0) {
        const diffs = [];
        for (const [k, label] of GROUP_FIELDS) if (g[k] !== first[k]) diffs.push(`${label} ${show(g[k])} (group 1: ${show(first[k])})`);
        out.push(
          diffs.length
            ? `group ${i + 1} differs from group 1 in its ${diffs.join('; ')}`
            : `group ${i + 1} has the same task, task digest, protocol fingerprint, metric and direction as group 1`,
        );
      }
      const rows = Array.isArray(g.rows) ? g.rows.filter(isObj) : [];
      for (const r of rows) {
        for (const k of ['metric', 'direction']) {
          if (Object.prototype.hasOwnProperty.call(r, k) && r[k] !== g[k])
            out.push(`group ${i + 1}: run ${show(r.run)} records ${k} ${show(r[k])}, the group ranks by ${show(g[k])}`);
        }
      }
    });
    return out;
  }

  // ---- Server-Sent Events ----------------------------------------------------------------------------------------

  /**
   * Parses the complete events at the start of an SSE text buffer (the WHATWG event-stream format): lines end in
   * CRLF, LF or CR; `:` lines are comments (keep-alives); `event`, `data` (lines joined by LF), `id` and `retry`
   * fields; a blank line ends an event; an event with no data line is not dispatched. Returns the events and `rest`,
   * the text from the first unfinished event on, to prepend to the next chunk. A CR at the very end is left in
   * `rest`, since the LF of its CRLF may come in the next chunk.
   */
  function parseSse(buffer) {
    const text = typeof buffer === 'string' ? buffer : '';
    const events = [];
    let consumed = 0;
    let pos = 0;
    let ev = { event: '', data: [], id: undefined, retry: undefined };
    for (;;) {
      let nl = -1;
      let next = -1;
      for (let j = pos; j < text.length; j++) {
        const c = text.charCodeAt(j);
        if (c === 10) {
          nl = j;
          next = j + 1;
          break;
        }
        if (c === 13) {
          if (j + 1 >= text.length) break; // a CR at the end: wait for what follows it
          nl = j;
          next = text.charCodeAt(j + 1) === 10 ? j + 2 : j + 1;
          break;
        }
      }
      if (nl < 0) break;
      const line = text.slice(pos, nl);
      pos = next;
      if (line === '') {
        if (ev.data.length > 0) {
          const out = { event: ev.event || 'message', data: ev.data.join('\n') };
          if (ev.id !== undefined) out.id = ev.id;
          if (ev.retry !== undefined) out.retry = ev.retry;
          events.push(out);
        }
        ev = { event: '', data: [], id: undefined, retry: undefined };
        consumed = pos;
        continue;
      }
      if (line.charCodeAt(0) === 58) continue; // ':' comment
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.charCodeAt(0) === 32) value = value.slice(1);
      if (field === 'event') ev.event = value;
      else if (field === 'data') ev.data.push(value);
      else if (field === 'id') {
        if (!value.includes('\u0000')) ev.id = value;
      } else if (field === 'retry') {
        if (/^\d+$/.test(value)) ev.retry = Number(value);
      }
    }
    return { events, rest: text.slice(consumed) };
  }

  /** Delay before reconnect attempt `attempt` (0, 1, ...): base·2^attempt up to max, times 0.75–1.25 with `rand`. */
  function backoffMs(attempt, opts) {
    const o = opts || {};
    const base = isNum(o.base) ? o.base : 1000;
    const max = isNum(o.max) ? o.max : 30000;
    const n = isCount(attempt) ? Math.min(attempt, 30) : 0;
    let d = Math.min(max, base * Math.pow(2, n));
    if (typeof o.rand === 'function') d = Math.min(max, Math.round(d * (0.75 + 0.5 * o.rand())));
    return d;
  }

  // ---- bytes -----------------------------------------------------------------------------------------------------

  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const B64_INDEX = new Map(Array.from(B64, (c, i) => [c, i]));
  const B64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

  function base64Encode(bytes) {
    let out = '';
    for (let i = 0; i < bytes.length; i += 3) {
      const a = bytes[i];
      const b = i + 1 < bytes.length ? bytes[i + 1] : 0;
      const c = i + 2 < bytes.length ? bytes[i + 2] : 0;
      const n = (a << 16) | (b << 8) | c;
      out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63];
      out += i + 1 < bytes.length ? B64[(n >> 6) & 63] : '=';
      out += i + 2 < bytes.length ? B64[n & 63] : '=';
    }
    return out;
  }

  /** Standard padded base64, canonical only (unused bits zero); null for anything else. */
  function base64Decode(s) {
    if (typeof s !== 'string' || !B64_RE.test(s)) return null;
    const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
    const out = new Uint8Array((s.length / 4) * 3 - pad);
    let o = 0;
    for (let i = 0; i < s.length; i += 4) {
      const n =
        (B64_INDEX.get(s[i]) << 18) |
        (B64_INDEX.get(s[i + 1]) << 12) |
        ((s[i + 2] === '=' ? 0 : B64_INDEX.get(s[i + 2])) << 6) |
        (s[i + 3] === '=' ? 0 : B64_INDEX.get(s[i + 3]));
      out[o++] = (n >> 16) & 255;
      if (o < out.length) out[o++] = (n >> 8) & 255;
      if (o < out.length) out[o++] = n & 255;
    }
    return base64Encode(out) === s ? out : null;
  }

  function toHex(bytes) {
    let s = '';
    for (let i = 0; i < bytes.length; i++) s += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
    return s;
  }

  function bytesEqual(a, b) {
    if (!(a instanceof Uint8Array) || !(b instanceof Uint8Array) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  function concat(...parts) {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let o = 0;
    for (const p of parts) {
      out.set(p, o);
      o += p.length;
    }
    return out;
  }

  const utf8Encode = (s) => new TextEncoder().encode(s);
  /** Strict UTF-8 (throws on malformed bytes). */
  const utf8Decode = (b) => new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(b);

  // SHA-256 in plain JavaScript (FIPS 180-4), for pages served without a secure context, where crypto.subtle is
  // missing. The pages use crypto.subtle when they have it.
  const K = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74,
    0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d,
    0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e,
    0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5,
    0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);

  function sha256Sync(bytes) {
    const len = bytes.length;
    const blocks = Math.ceil((len + 9) / 64);
    const m = new Uint8Array(blocks * 64);
    m.set(bytes);
    m[len] = 0x80;
    const bits = len * 8;
    const dv = new DataView(m.buffer);
    dv.setUint32(m.length - 8, Math.floor(bits / 0x100000000));
    dv.setUint32(m.length - 4, bits >>> 0);
    const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    const w = new Uint32Array(64);
    const rotr = (x, n) => (x >>> n) | (x << (32 - n));
    for (let b = 0; b < blocks; b++) {
      for (let i = 0; i < 16; i++) w[i] = dv.getUint32(b * 64 + i * 4);
      for (let i = 16; i < 64; i++) {
        const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
        const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) >>> 0;
      }
      let [a, bb, c, d, e, f, g, hh] = h;
      for (let i = 0; i < 64; i++) {
        const S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        const ch = (e & f) ^ (~e & g);
        const t1 = (hh + S1 + ch + K[i] + w[i]) >>> 0;
        const S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        const maj = (a & bb) ^ (a & c) ^ (bb & c);
        const t2 = (S0 + maj) >>> 0;
        hh = g;
        g = f;
        f = e;
        e = (d + t1) >>> 0;
        d = c;
        c = bb;
        bb = a;
        a = (t1 + t2) >>> 0;
      }
      h[0] += a;
      h[1] += bb;
      h[2] += c;
      h[3] += d;
      h[4] += e;
      h[5] += f;
      h[6] += g;
      h[7] += hh;
    }
    const out = new Uint8Array(32);
    const ov = new DataView(out.buffer);
    for (let i = 0; i < 8; i++) ov.setUint32(i * 4, h[i]);
    return out;
  }

  /** The async SHA-256 the checks take, in plain JavaScript. */
  const sha256Js = async (bytes) => sha256Sync(bytes);

  // ---- RFC 8785 canonical JSON (the ledger's wire format) --------------------------------------------------------

  const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

  /** JCS: members sorted by UTF-16 code units, JSON.stringify's strings and numbers, no whitespace. Throws on non-JSON. */
  function canonicalJson(value) {
    if (value === null) return 'null';
    switch (typeof value) {
      case 'boolean':
        return value ? 'true' : 'false';
      case 'number':
        if (!Number.isFinite(value)) throw new Error(`cannot canonicalize the number ${value}`);
        return JSON.stringify(value);
      case 'string':
        if (LONE_SURROGATE.test(value)) throw new Error('cannot canonicalize a string with a lone surrogate');
        return JSON.stringify(value);
      case 'object':
        if (Array.isArray(value)) return '[' + value.map(canonicalJson).join(',') + ']';
        return (
          '{' +
          Object.keys(value)
            .sort()
            .map((k) => canonicalJson(k) + ':' + canonicalJson(value[k]))
            .join(',') +
          '}'
        );
      default:
        throw new Error(`cannot canonicalize a value of type ${typeof value}`);
    }
  }

  // ---- signed notes, checkpoints, tlog-proof ---------------------------------------------------------------------

  const SIG_LINE_RE = /^\u2014 ([^\s+\u0085]+) ([A-Za-z0-9+/]+={0,2})$/u;
  const NOTE_CONTROL = /[\u0000-\u0009\u000b-\u001f]/;

  /**
   * A C2SP signed note, parsed but NOT verified: `body` (the text up to its last blank line, final newline
   * included) and its signature lines. Each signature: `name`, `keyIdHex`, `bytes` (after the key id), `kind`
   * (`ed25519`: 64 signature bytes; `cosignature`: 8-byte timestamp and 64 bytes, C2SP tlog-cosignature v1, with
   * `timestamp` in POSIX seconds; `unknown` otherwise) and `role`: `log` for the name of the first signature line
   * (Assay signs its checkpoints first), `cosigner` for any other name. Throws an Error saying what is wrong.
   */
  function parseSignedNote(text) {
    if (typeof text !== 'string') throw new Error('the note is not text');
    if (text.length > 1024 * 1024) throw new Error('the note is larger than 1 MiB');
    if (NOTE_CONTROL.test(text)) throw new Error('the note contains a control character');
    if (!text.endsWith('\n')) throw new Error('the note does not end with a newline');
    const split = text.lastIndexOf('\n\n');
    if (split < 0) throw new Error('the note has no blank line before its signatures');
    const body = text.slice(0, split + 1);
    const lines = text.slice(split + 2, -1).split('\n');
    if (lines.length === 0 || lines[0] === '') throw new Error('the note has no signature line');
    if (lines.length > 100) throw new Error('the note has more than 100 signature lines');
    const signatures = lines.map((line, i) => {
      const m = SIG_LINE_RE.exec(line);
      if (!m) throw new Error(`signature line ${i + 1} is not "— <name> <base64>"`);
      const all = base64Decode(m[2]);
      if (!all || all.length < 5) throw new Error(`signature line ${i + 1} does not hold canonical base64 of a key id and a signature`);
      const bytes = all.slice(4);
      const sig = { name: m[1], keyIdHex: toHex(all.slice(0, 4)), bytes, kind: 'unknown', timestamp: null, role: 'log' };
      if (bytes.length === 64) sig.kind = 'ed25519';
      else if (bytes.length === 72) {
        sig.kind = 'cosignature';
        const dv = new DataView(bytes.buffer, bytes.byteOffset, 8);
        const t = dv.getUint32(0) * 0x100000000 + dv.getUint32(4);
        sig.timestamp = Number.isSafeInteger(t) ? t : null;
      }
      return sig;
    });
    const logName = signatures[0].name;
    for (const s of signatures) s.role = s.name === logName ? 'log' : 'cosigner';
    return { body, signatures };
  }

  /** A C2SP tlog-checkpoint body: origin, tree size, 32-byte root, extension lines. Throws an Error when malformed. */
  function parseCheckpointBody(body) {
    if (typeof body !== 'string' || !body.endsWith('\n')) throw new Error('the checkpoint body does not end with a newline');
    const lines = body.slice(0, -1).split('\n');
    if (lines.length < 3) throw new Error('the checkpoint body has fewer than 3 lines');
    const [origin, size, root] = lines;
    if (!origin) throw new Error('the checkpoint origin line is empty');
    if (!/^(0|[1-9]\d{0,15})$/.test(size) || !Number.isSafeInteger(Number(size))) throw new Error('the checkpoint tree size is not a decimal in [0, 2^53)');
    const rootHash = base64Decode(root);
    if (!rootHash || rootHash.length !== 32) throw new Error('the checkpoint root is not canonical base64 of 32 bytes');
    const extensions = lines.slice(3);
    if (extensions.some((l) => l === '')) throw new Error('the checkpoint has an empty extension line');
    return { origin, treeSize: Number(size), rootHash, rootHashBase64: root, extensions };
  }

  /** A checkpoint note: its parsed body and (unverified) signatures. */
  function parseCheckpointNote(text) {
    const note = parseSignedNote(text);
    return { ...parseCheckpointBody(note.body), body: note.body, signatures: note.signatures };
  }

  const TLOG_PROOF_HEADER = 'c2sp.org/tlog-proof@v1';

  /**
   * c2sp.org/tlog-proof@v1 text: `index` (the leaf index), `proof` (32-byte hashes, leaf side first),
   * `checkpointText` (the note as given) and `checkpoint` (its parsed body and signature lines, unverified).
   * Throws an Error saying what is wrong.
   */
  function parseTlogProof(text) {
    if (typeof text !== 'string') throw new Error('the proof is not text');
    if (text.length > 64 * 1024) throw new Error('the proof is larger than 64 KiB');
    const split = text.indexOf('\n\n');
    if (split < 0) throw new Error('the proof has no blank line before its checkpoint');
    const lines = text.slice(0, split).split('\n');
    if (lines[0] !== TLOG_PROOF_HEADER) throw new Error(`the proof's first line is not "${TLOG_PROOF_HEADER}"`);
    let i = 1;
    if (typeof lines[i] === 'string' && lines[i].startsWith('extra ')) i++;
    const m = /^index (0|[1-9]\d{0,15})$/.exec(lines[i] || '');
    if (!m || !Number.isSafeInteger(Number(m[1]))) throw new Error(`line ${i + 1} of the proof is not "index <decimal>"`);
    const proof = lines.slice(i + 1).map((l, k) => {
      const h = /^[A-Za-z0-9+/]{43}=$/.test(l) ? base64Decode(l) : null;
      if (!h) throw new Error(`line ${i + 2 + k} of the proof is not a base64 SHA-256 hash`);
      return h;
    });
    if (proof.length > 64) throw new Error('the proof has more than 64 hashes');
    const checkpointText = text.slice(split + 2);
    let checkpoint;
    try {
      checkpoint = parseCheckpointNote(checkpointText);
    } catch (e) {
      throw new Error(`the proof's checkpoint: ${e.message}`);
    }
    return { index: Number(m[1]), proof, checkpointText, checkpoint };
  }

  // ---- RFC 9162 Merkle tree --------------------------------------------------------------------------------------

  /** RFC 9162 leaf hash: SHA-256(0x00 || bytes). */
  const leafHash = (bytes, sha256) => sha256(concat(new Uint8Array([0]), bytes));
  /** RFC 9162 interior node: SHA-256(0x01 || left || right). */
  const nodeHash = (left, right, sha256) => sha256(concat(new Uint8Array([1]), left, right));

  const isHash = (h) => h instanceof Uint8Array && h.length === 32;
  const half = (n) => Math.floor(n / 2);

  /**
   * RFC 9162 2.1.3.2: whether `path` proves the leaf hash `leaf` at `index` in the tree of `size` leaves whose root
   * is `root`. `sha256` is async (bytes → 32 bytes). Resolves to { ok, reason }.
   */
  async function verifyInclusion(leaf, index, size, path, root, sha256) {
    const no = (reason) => ({ ok: false, reason });
    if (!isCount(index) || !isCount(size)) return no('the index and the tree size must be whole numbers in [0, 2^53)');
    if (!isHash(leaf)) return no('the leaf hash is not 32 bytes');
    if (!isHash(root)) return no('the root is not 32 bytes');
    if (!Array.isArray(path) || path.length > 64 || !path.every(isHash)) return no('the proof is not a list of at most 64 hashes of 32 bytes');
    if (index >= size) return no(`index ${index} is not below the tree size ${size}`);
    let fn = index;
    let sn = size - 1;
    let r = leaf;
    for (const p of path) {
      if (sn === 0) return no(`the proof has more hashes than index ${index} in a tree of ${size} needs`);
      if (fn % 2 === 1 || fn === sn) {
        r = await nodeHash(p, r, sha256);
        if (fn % 2 === 0) {
          while (fn % 2 === 0 && fn !== 0) {
            fn = half(fn);
            sn = half(sn);
          }
        }
      } else {
        r = await nodeHash(r, p, sha256);
      }
      fn = half(fn);
      sn = half(sn);
    }
    if (sn !== 0) return no(`the proof has fewer hashes than index ${index} in a tree of ${size} needs`);
    if (!bytesEqual(r, root)) return no("the root computed from the leaf hash and the proof differs from the checkpoint's root");
    return { ok: true, reason: `the leaf hash and the ${path.length} proof hash(es) give the checkpoint's root for index ${index} in a tree of ${size}` };
  }

  // ---- the inclusion check of an event ---------------------------------------------------------------------------

  const ENVELOPE_FIELDS = ['data', 'id', 'position', 'prev', 'revision', 'sig', 'signer', 'stream', 'time', 'type'];
  /** The members compared between the event as the API returned it and its envelope bytes (data separately). */
  const SHOWN_FIELDS = ENVELOPE_FIELDS.filter((k) => k !== 'data');

  /**
   * The envelope's wire bytes from an event the API returned: its `envelope` (base64), or else, when the event has
   * every envelope member, their RFC 8785 canonical form. { bytes, from } or { error }.
   */
  function envelopeBytesOf(event) {
    if (!isObj(event)) return { error: 'the API returned no event' };
    if (typeof event.envelope === 'string') {
      const bytes = base64Decode(event.envelope);
      return bytes ? { bytes, from: 'the envelope bytes the API returned' } : { error: "the event's envelope is not canonical base64" };
    }
    const absent = ENVELOPE_FIELDS.filter((k) => !Object.prototype.hasOwnProperty.call(event, k));
    if (absent.length) return { error: `the API returned neither the envelope bytes nor every envelope member (missing: ${absent.join(', ')})` };
    try {
      const env = {};
      for (const k of ENVELOPE_FIELDS) env[k] = event[k];
      return { bytes: utf8Encode(canonicalJson(env)), from: "the canonical form of the event's members" };
    } catch (e) {
      return { error: `the event's members cannot be canonicalized: ${e.message}` };
    }
  }

  /**
   * Checks that the event at `position` is in the log: parses the proof, its checkpoint and the event's envelope
   * bytes, and runs RFC 9162 2.1.3.2 with SHA-256(0x00 || envelope bytes) (the ledger's leaf: the hash of its
   * canonical wire bytes), the proof's index and the checkpoint's tree size and root. Signatures are NOT checked.
   * `shown` ({ treeSize, rootHash: base64 }) is the checkpoint the page shows, compared for information.
   * Resolves to { included, reason, steps: [{ name, ok (true/false/null: skipped), required, detail }], ... }.
   */
  async function checkInclusion({ position, event, proofText, sha256, shown }) {
    const steps = [];
    const step = (name, ok, detail, required) => {
      steps.push({ name, ok, detail, required: required !== false });
      return ok;
    };
    const done = (extra) => {
      const failed = steps.find((s) => s.required && s.ok === false);
      return {
        included: !failed,
        reason: failed ? failed.detail : steps.find((s) => s.name === 'merkle').detail,
        steps,
        ...extra,
      };
    };
    if (!step('position', isCount(position), isCount(position) ? `position ${position}` : 'the position is not a whole number')) return done({});
    let proof;
    try {
      proof = parseTlogProof(proofText);
      step('proof', true, `tlog-proof with ${proof.proof.length} hash(es) against a checkpoint of tree size ${proof.checkpoint.treeSize}`);
    } catch (e) {
      step('proof', false, e.message);
      return done({});
    }
    const cp = proof.checkpoint;
    if (
      !step(
        'index',
        proof.index === position,
        proof.index === position ? `the proof is for index ${position}` : `the proof is for index ${proof.index}, not ${position}`,
      )
    )
      return done({ proof });
    if (shown && isObj(shown)) {
      const same = shown.treeSize === cp.treeSize && shown.rootHash === cp.rootHashBase64;
      step(
        'checkpoint',
        same,
        same
          ? 'the proof is against the checkpoint shown above'
          : `the proof is against the checkpoint of tree size ${cp.treeSize}, not the one shown above (tree size ${shown.treeSize}): a newer checkpoint was signed since`,
        false,
      );
    }
    const got = envelopeBytesOf(event);
    if (!step('bytes', !got.error, got.error || `${got.bytes.length} envelope bytes, from ${got.from}`)) return done({ proof });
    const bytes = got.bytes;
    const envelopeHash = toHex(await sha256(bytes));
    if (isObj(event) && typeof event.hash === 'string') {
      const ok = event.hash.toLowerCase() === envelopeHash;
      step(
        'hash',
        ok,
        ok ? `SHA-256 of the envelope bytes is the event's hash ${envelopeHash}` : `SHA-256 of the envelope bytes is ${envelopeHash}, not the event's hash`,
      );
    } else step('hash', null, 'the API returned no envelope hash to compare', false);
    let env = null;
    let text = null;
    try {
      text = utf8Decode(bytes);
      env = JSON.parse(text);
      if (!isObj(env)) throw new Error('not a JSON object');
    } catch (e) {
      step('envelope', false, `the envelope bytes are not a JSON object: ${e.message}`);
      return done({ proof, envelopeHash });
    }
    step(
      'envelope position',
      env.position === position,
      env.position === position
        ? `the envelope's position is ${position}: the leaf index is the position`
        : `the envelope's position is ${JSON.stringify(env.position)}, not ${position}: a proof of these bytes at another index shows a damaged log`,
    );
    let canonical = false;
    try {
      canonical = canonicalJson(env) === text;
    } catch (_e) {
      canonical = false;
    }
    step(
      'canonical',
      canonical,
      canonical ? 'the envelope bytes are canonical JSON (RFC 8785)' : 'the envelope bytes are not canonical JSON (RFC 8785), as stored wire bytes are',
      false,
    );
    const differs = SHOWN_FIELDS.filter((k) => isObj(event) && Object.prototype.hasOwnProperty.call(event, k) && event[k] !== env[k]);
    if (isObj(event) && Object.prototype.hasOwnProperty.call(event, 'data')) {
      let same = false;
      try {
        same = canonicalJson(event.data) === canonicalJson(env.data);
      } catch (_e) {
        same = false;
      }
      if (!same) differs.push('data');
    }
    step(
      'fields',
      differs.length === 0,
      differs.length === 0
        ? "the event's fields shown are those of its envelope bytes"
        : `the event's fields differ from its envelope bytes: ${differs.join(', ')}`,
    );
    const leaf = await leafHash(bytes, sha256);
    const v = await verifyInclusion(leaf, position, cp.treeSize, proof.proof, cp.rootHash, sha256);
    step('merkle', v.ok, v.reason);
    return done({ proof, envelopeHash, leafHash: toHex(leaf), envelope: env });
  }

  // ---- generic rendering helpers ---------------------------------------------------------------------------------

  /**
   * The columns of an array shown as a table: the union of its items' keys in order of first appearance, when
   * every item is a plain object (and there is at least one); null otherwise.
   */
  function tableColumns(value, maxColumns) {
    if (!Array.isArray(value) || value.length === 0 || !value.every(isObj)) return null;
    const cols = [];
    const seen = new Set();
    for (const item of value)
      for (const k of Object.keys(item)) {
        if (!seen.has(k)) {
          seen.add(k);
          cols.push(k);
        }
      }
    return cols.slice(0, maxColumns || 64);
  }

  return {
    formatMs,
    formatNumber,
    formatSigned,
    formatPercent,
    shortCid,
    statusClass,
    apiBase,
    trajectorySeries,
    getPath,
    compareValues,
    sortRows,
    groupDifferences,
    parseSse,
    backoffMs,
    base64Encode,
    base64Decode,
    toHex,
    bytesEqual,
    utf8Encode,
    utf8Decode,
    sha256Js,
    canonicalJson,
    parseSignedNote,
    parseCheckpointBody,
    parseCheckpointNote,
    parseTlogProof,
    leafHash,
    nodeHash,
    verifyInclusion,
    envelopeBytesOf,
    checkInclusion,
    tableColumns,
  };
});
