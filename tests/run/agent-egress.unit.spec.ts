/**
 * Vendor agents behind the egress forwarder, as data: the argv run in Work, the exec environment (the key only
 * there, plus the proxy variables), the network rule turned into a policy, and secret redaction of streamed output
 * and error messages. Nothing is run.
 */
import { AssayError } from '@assay/core';
import {
  agentBinary,
  agentBinaryMissing,
  ClaudeCodeAgent,
  CodexAgent,
  CommandAgent,
  EGRESS_FORWARDER_IN_WORK,
  egressPolicyOf,
  publicLaunch,
  redactErrorSecrets,
  redactSecretsAnyCase,
  REDACTED,
  SecretStreamRedactor,
  withEgress,
  type AgentContext,
} from '@assay/run';
import { planWorkEgress } from '../../libs/runtime/src/work-egress';

const KEY = 'sk-test-0123456789abcdef';
const ctx = (env: Record<string, string | undefined>): AgentContext => ({ workdir: '/workspace', instruction: 'Make it faster.', operatorEnv: env });
const PROXY = 'http://127.0.0.1:3128';

describe('vendor agents behind the egress forwarder', () => {
  it('codex: forwarder argv around `codex exec`, key and proxy variables in the exec env only', () => {
    const l = new CodexAgent({ model: 'gpt-test' }).launch(ctx({ OPENAI_API_KEY: KEY, HTTPS_PROXY: 'http://operator-proxy:8080', NO_PROXY: '*' }));
    const w = withEgress(l);
    expect(w.argv.slice(0, 6)).toEqual([EGRESS_FORWARDER_IN_WORK, '--listen', '127.0.0.1:3128', '--socket', '/run/assay/egress.sock', '--']);
    expect(w.argv.slice(6)).toEqual(l.argv);
    expect(w.argv.slice(6, 13)).toEqual(['codex', 'exec', '--full-auto', '--skip-git-repo-check', '--cd', '/workspace', '--model']);
    expect(w.env).toEqual({
      OPENAI_API_KEY: KEY,
      HOME: '/tmp/agent-home',
      HTTPS_PROXY: PROXY,
      https_proxy: PROXY,
      HTTP_PROXY: PROXY,
      http_proxy: PROXY,
      ALL_PROXY: PROXY,
      all_proxy: PROXY,
      NO_PROXY: '',
      no_proxy: '',
    });
    expect(JSON.stringify(w.argv)).not.toContain(KEY);
    expect(w.secretEnv).toEqual(['OPENAI_API_KEY']);
    expect(JSON.stringify(publicLaunch(w))).not.toContain(KEY);
    expect(agentBinary(l)).toBe('codex');
    expect(egressPolicyOf(l.network)).toEqual({ hosts: ['api.openai.com'], ports: [443] });
  });

  it('claude-code: forwarder argv around `claude --print`, ANTHROPIC_API_KEY, the Anthropic API only', () => {
    const l = new ClaudeCodeAgent().launch(ctx({ ANTHROPIC_API_KEY: KEY, OPENAI_API_KEY: 'other-key-1234' }));
    const w = withEgress(l, { port: 4000 });
    expect(w.argv.slice(0, 6)).toEqual([EGRESS_FORWARDER_IN_WORK, '--listen', '127.0.0.1:4000', '--socket', '/run/assay/egress.sock', '--']);
    expect(w.argv[6]).toBe('claude');
    expect(w.argv).toContain('--print');
    expect(w.env).toMatchObject({ ANTHROPIC_API_KEY: KEY, HTTPS_PROXY: 'http://127.0.0.1:4000', DISABLE_TELEMETRY: '1' });
    expect(w.env).not.toHaveProperty('OPENAI_API_KEY');
    expect(egressPolicyOf(l.network)).toEqual({ hosts: ['api.anthropic.com'], ports: [443] });
  });

  it('planWorkEgress: the forwarder mounted read-only, WorkStarted limits name the allowlist; none for command agents', () => {
    const l = new CodexAgent().launch(ctx({ OPENAI_API_KEY: KEY }));
    const plan = planWorkEgress(l);
    expect(plan.mounts).toEqual([
      { type: 'bind', source: expect.stringMatching(/task-runtime\/egress\/assay-egress-forward$/), target: EGRESS_FORWARDER_IN_WORK, readOnly: true },
    ]);
    expect(plan.limits).toEqual({ network: 'none', egress: 'connect-proxy', egressHosts: ['api.openai.com'], egressPorts: [443] });
    expect(JSON.stringify(plan.limits)).not.toContain(KEY);
    expect(plan.launch.argv[0]).toBe(EGRESS_FORWARDER_IN_WORK);

    const c = new CommandAgent('echo hi').launch(ctx({}));
    expect(planWorkEgress(c)).toEqual({ launch: c, mounts: [], limits: { network: 'none' } });
    expect(withEgress(c)).toBe(c);
    expect(egressPolicyOf(c.network)).toBeNull();
  });

  it('a missing binary is RUN_AGENT_UNAVAILABLE naming the binary and how to provide it', () => {
    const l = new ClaudeCodeAgent().launch(ctx({ ANTHROPIC_API_KEY: KEY }));
    const e = agentBinaryMissing(l, 'claude', `sha256:${'a'.repeat(64)}`);
    expect(e).toBeInstanceOf(AssayError);
    expect(e.code).toBe('RUN_AGENT_UNAVAILABLE');
    expect(e.kind).toBe('unavailable');
    expect(e.message).toMatch(/needs `claude` on PATH in the task's work image/);
    expect(e.message).toMatch(/environment\/Dockerfile/);
    expect(e.message).toMatch(/@anthropic-ai\/claude-code/);
    expect(e.message).not.toContain(KEY);
  });
});

describe('secret redaction', () => {
  const l = new CodexAgent().launch(ctx({ OPENAI_API_KEY: KEY }));

  it('SecretStreamRedactor catches a key split across chunks, at any cut', () => {
    const text = `before ${KEY} middle ${KEY}${KEY} after é ✓`;
    const bytes = Buffer.from(text, 'utf8');
    for (let a = 0; a <= bytes.length; a += 3) {
      for (const b of [a, Math.min(bytes.length, a + 1), Math.min(bytes.length, a + 7)]) {
        const r = new SecretStreamRedactor(l);
        const out = r.push(bytes.subarray(0, a)) + r.push(bytes.subarray(a, b)) + r.push(bytes.subarray(b)) + r.end();
        expect(out).toBe(`before ${REDACTED} middle ${REDACTED}${REDACTED} after é ✓`);
      }
    }
  });

  it('SecretStreamRedactor holds back only what could start a secret', () => {
    const r = new SecretStreamRedactor(l);
    expect(r.push(Buffer.from('nets=lo \n'))).toBe('nets=lo \n');
    expect(r.push(Buffer.from('token sk-te'))).toBe('token ');
    expect(r.push(Buffer.from('a party'))).toBe('sk-tea party');
    expect(r.push(Buffer.from(`x ${KEY.slice(0, 10)}`))).toBe('x ');
    expect(r.push(Buffer.from(`${KEY.slice(10)}!`))).toBe(`${REDACTED}!`);
    expect(r.end()).toBe('');
  });

  it('SecretStreamRedactor passes text through when there is no secret', () => {
    const r = new SecretStreamRedactor(new CommandAgent('x').launch(ctx({})));
    expect(r.push(Buffer.from('abc')) + r.end()).toBe('abc');
  });

  it('redactSecretsAnyCase catches a key that was lowercased (a host name through the proxy)', () => {
    const mixed = new CodexAgent().launch(ctx({ OPENAI_API_KEY: 'sk-Proj-AbC.d+e(f)*9' }));
    expect(redactSecretsAnyCase('egress refused 403 sk-proj-abc.d+e(f)*9.evil.test:443 and SK-PROJ-ABC.D+E(F)*9', mixed)).toBe(
      `egress refused 403 ${REDACTED}.evil.test:443 and ${REDACTED}`,
    );
    expect(redactSecretsAnyCase('sk-proj-abcXd+e(f)*9', mixed)).toBe('sk-proj-abcXd+e(f)*9'); // metacharacters are literal
  });

  it('redactErrorSecrets rewrites message and stack', () => {
    const e = new Error(`docker said: OPENAI_API_KEY=${KEY} is bad`);
    const out = redactErrorSecrets(e, l) as Error;
    expect(out).toBe(e);
    expect(out.message).toBe(`docker said: OPENAI_API_KEY=${REDACTED} is bad`);
    expect(out.stack).not.toContain(KEY);
    expect(redactErrorSecrets('plain', l)).toBe('plain');
    expect(redactErrorSecrets(e, null)).toBe(e);
  });
});
