/** The agent adapters as data: commands, environments (secrets redacted), network rules. Nothing is run. */
import { ClaudeCodeAgent, CodexAgent, CommandAgent, parseAgent, publicLaunch, redactSecrets, REDACTED, ReferenceAgent, type AgentContext } from '@assay/run';

const KEY = 'sk-test-0123456789abcdef';
const ctx = (env: Record<string, string | undefined> = {}): AgentContext => ({ workdir: '/workspace', instruction: 'Make it faster.', operatorEnv: env });

describe('agents', () => {
  it('command: bash -c, no secrets, no network', () => {
    const l = new CommandAgent('echo hi && rsi-submit').launch(ctx());
    expect(l).toMatchObject({
      name: 'command',
      argv: ['bash', '-c', 'echo hi && rsi-submit'],
      env: {},
      secretEnv: [],
      network: { mode: 'none' },
      mountDir: null,
    });
    expect(() => new CommandAgent('  ')).toThrow(/needs a command/);
  });

  it('reference: the agent directory mounted read-only, no network', () => {
    const l = new ReferenceAgent('/repo/examples/agents/reference-agent').launch(ctx());
    expect(l).toMatchObject({
      name: 'reference-agent',
      argv: ['bash', '/opt/assay/agent/agent.sh'],
      mountDir: '/repo/examples/agents/reference-agent',
      network: { mode: 'none' },
    });
  });

  it('codex: the key from the operator env by name, redacted; network limited to the OpenAI API', () => {
    const l = new CodexAgent({ model: 'gpt-test' }).launch(ctx({ OPENAI_API_KEY: KEY, ANTHROPIC_API_KEY: 'other' }));
    expect(l.argv.slice(0, 2)).toEqual(['codex', 'exec']);
    expect(l.argv).toContain('gpt-test');
    expect(l.argv[l.argv.length - 1]).toMatch(/^Make it faster\.[\s\S]*rsi-submit/);
    expect(l.env.OPENAI_API_KEY).toBe(KEY);
    expect(l.env).not.toHaveProperty('ANTHROPIC_API_KEY');
    expect(l.secretEnv).toEqual(['OPENAI_API_KEY']);
    expect(l.network).toEqual({ mode: 'allowlist', hosts: ['api.openai.com'], ports: [443] });
    const pub = publicLaunch(l);
    expect(pub.env.OPENAI_API_KEY).toBe(REDACTED);
    expect(JSON.stringify(pub)).not.toContain(KEY);
    expect(redactSecrets(`auth failed for ${KEY}!`, l)).toBe(`auth failed for ${REDACTED}!`);
    expect(JSON.stringify(l.argv)).not.toContain(KEY);
  });

  it('claude-code: ANTHROPIC_API_KEY, print mode, network limited to the Anthropic API', () => {
    const l = new ClaudeCodeAgent().launch(ctx({ ANTHROPIC_API_KEY: KEY }));
    expect(l.argv[0]).toBe('claude');
    expect(l.argv).toContain('--print');
    expect(l.model).toBeTruthy();
    expect(l.secretEnv).toEqual(['ANTHROPIC_API_KEY']);
    expect(l.network).toEqual({ mode: 'allowlist', hosts: ['api.anthropic.com'], ports: [443] });
    expect(JSON.stringify(publicLaunch(l))).not.toContain(KEY);
  });

  it('a missing key is an error naming the variable', () => {
    expect(() => new CodexAgent().launch(ctx())).toThrow(/OPENAI_API_KEY/);
    expect(() => new ClaudeCodeAgent().launch(ctx({ ANTHROPIC_API_KEY: ' ' }))).toThrow(/ANTHROPIC_API_KEY/);
  });

  it('parseAgent', () => {
    const o = { referenceDir: '/r' };
    expect(parseAgent('reference', o).kind).toBe('reference');
    expect(parseAgent('command:ls -l', o).launch(ctx()).argv).toEqual(['bash', '-c', 'ls -l']);
    expect(parseAgent('codex:gpt-x', o).launch(ctx({ OPENAI_API_KEY: KEY })).model).toBe('gpt-x');
    expect(parseAgent('claude-code', o).kind).toBe('claude-code');
    expect(() => parseAgent('gpt', o)).toThrow(/--agent must be/);
  });
});
