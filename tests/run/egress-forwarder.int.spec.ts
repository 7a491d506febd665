/**
 * The in-Work forwarder with real Docker: a container with `--network none` (only `lo`, checked by inspect and
 * /sys/class/net) runs task-runtime/egress/assay-egress-forward on its own 127.0.0.1:3128, relaying to the egress
 * proxy's Unix socket mounted from the host. A client inside uses http://127.0.0.1:3128 as its proxy: a CONNECT to
 * the allowlisted upstream (a loopback server on the host, reached through the controller) works, a non-listed host
 * is refused with 403, and a plain-HTTP (absolute-form) request is refused with 405. No packet leaves the machine:
 * the listed name is resolved to 127.0.0.1 by the test's lookup, and refused names are never resolved.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EgressProxy, egressPolicy } from '@assay/run';
import { BASE_IMAGE, describeDocker } from '../support/docker';
import { forwarderPath } from '../../libs/runtime/src/work-egress';

jest.setTimeout(120_000);

/** docker CLI, asynchronously: the proxy under test lives in this process and must keep serving meanwhile. */
function docker(args: string[], timeoutMs = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('docker', args, { timeout: timeoutMs, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

const CLIENT = `
import http.client, json, os, sys, urllib.request
host, port = sys.argv[1], int(sys.argv[2])
out = {}
def tunnel(h, p):
    c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
    c.set_tunnel(h, p)
    try:
        c.request("GET", "/from-work")
        r = c.getresponse()
        return "%d %s" % (r.status, r.read().decode())
    except OSError as e:
        return "error: %s" % e
    finally:
        c.close()
out["allowed"] = tunnel(host, port)
out["not_listed"] = tunnel("api.openai.com", 443)
out["wrong_port"] = tunnel(host, 1)
os.environ["http_proxy"] = "http://127.0.0.1:3128"
try:
    urllib.request.urlopen("http://%s:%d/plain" % (host, port), timeout=20)
    out["plain_http"] = "opened"
except urllib.error.HTTPError as e:
    out["plain_http"] = "%d" % e.code
print(json.dumps(out))
`;

describeDocker('egress forwarder in a --network none container', () => {
  let dir: string;
  let server: http.Server;
  let upPort: number;
  let hits: string[];
  let proxy: EgressProxy;
  let lookups: string[];
  let container = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'assay-egress-docker-'));
    chmodSync(dir, 0o700);
    hits = [];
    server = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      res.end(`hello ${req.url} via ${req.headers.host}`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    upPort = (server.address() as AddressInfo).port;
    lookups = [];
    proxy = await EgressProxy.listen({
      socketPath: join(dir, 'egress.sock'),
      policy: egressPolicy(['upstream.assay.test'], [upPort]),
      allowNonPublicAddresses: true,
      lookup: async (h) => {
        lookups.push(h);
        if (h !== 'upstream.assay.test') throw new Error(`unexpected lookup of ${h}`);
        return [{ address: '127.0.0.1', family: 4 }];
      },
    });
    const run = await docker([
      'run',
      '-d',
      '--rm',
      '--network',
      'none',
      '--cap-drop',
      'ALL',
      '--security-opt',
      'no-new-privileges',
      '--label',
      'org.assay.role=test-egress',
      '-v',
      `${dir}:/run/assay:ro`,
      '-v',
      `${forwarderPath()}:/usr/local/bin/assay-egress-forward:ro`,
      BASE_IMAGE,
      'assay-egress-forward',
      '--listen',
      '127.0.0.1:3128',
      '--socket',
      '/run/assay/egress.sock',
    ]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    container = run.stdout.trim();
  });

  afterAll(async () => {
    if (container) await docker(['rm', '-f', container]);
    await proxy.close();
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('Work has no network: network mode none, only lo', async () => {
    const mode = await docker(['inspect', '-f', '{{.HostConfig.NetworkMode}}', container]);
    expect(mode.stdout.trim()).toBe('none');
    const nets = await docker(['exec', container, 'ls', '/sys/class/net']);
    expect(nets.stdout.split(/\s+/).filter(Boolean)).toEqual(['lo']);
  });

  it('through http://127.0.0.1:3128: the allowlisted upstream answers, a non-listed host is 403, plain HTTP is 405', async () => {
    // the forwarder may still be starting
    let r = { code: 1, stdout: '', stderr: '' };
    for (let i = 0; i < 50; i++) {
      r = await docker(['exec', container, 'python3', '-c', 'import socket; socket.create_connection(("127.0.0.1", 3128), 1).close()']);
      if (r.code === 0) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    expect(r.code).toBe(0);
    const c = await docker(['exec', container, 'python3', '-I', '-c', CLIENT, 'upstream.assay.test', String(upPort)]);
    expect(c.stderr).toBe('');
    const out = JSON.parse(c.stdout) as Record<string, string>;
    expect(out.allowed).toBe(`200 hello /from-work via upstream.assay.test:${upPort}`);
    expect(out.not_listed).toMatch(/Tunnel connection failed: 403/);
    expect(out.wrong_port).toMatch(/Tunnel connection failed: 403/);
    expect(out.plain_http).toBe('405');
    expect(hits).toEqual(['/from-work']);
    expect(lookups).toEqual(['upstream.assay.test']); // api.openai.com was never resolved
    const s = proxy.stats();
    expect(s.allowed).toEqual({ [`upstream.assay.test:${upPort}`]: 1 });
    expect(s.refused).toMatchObject({ 'api.openai.com:443': 1, 'upstream.assay.test:1': 1 });
  });

  it('the forwarder listens on loopback only and reports a missing command', async () => {
    const bad = await docker(['exec', container, 'python3', '-I', '/usr/local/bin/assay-egress-forward', '--listen', '0.0.0.0:3129']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/loopback only/);
    const missing = await docker([
      'exec',
      container,
      'python3',
      '-I',
      '/usr/local/bin/assay-egress-forward',
      '--listen',
      '127.0.0.1:3130',
      '--',
      'codex',
      'exec',
    ]);
    expect(missing.code).toBe(127);
    expect(missing.stderr).toMatch(/`codex` is not installed in this Work image/);
    const wrapped = await docker([
      'exec',
      '-e',
      'HTTPS_PROXY=http://127.0.0.1:3131',
      container,
      'assay-egress-forward',
      '--listen',
      '127.0.0.1:3131',
      '--',
      'sh',
      '-c',
      "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 3131), 2).close(); print('relay up')\"; exit 7",
    ]);
    expect(wrapped.stdout).toContain('relay up');
    expect(wrapped.code).toBe(7); // the command's status
  });
});
