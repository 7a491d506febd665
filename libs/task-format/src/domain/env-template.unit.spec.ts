import { AssayError } from '@assay/core';
import { TASK_ERROR_CODES as C } from '../task-format.errors';
import { mergeEnv, parseEnvTemplate, REDACTED, redactText, resolveEnvTemplates, templateNames } from './env-template';

describe('parseEnvTemplate', () => {
  it.each([
    ['plain', { kind: 'literal', value: 'plain' }],
    ['$HOME/x', { kind: 'literal', value: '$HOME/x' }],
    ['${TOKEN}', { kind: 'host', name: 'TOKEN', fallback: null }],
    ['${PORT:-8000}', { kind: 'host', name: 'PORT', fallback: '8000' }],
    ['${EMPTY:-}', { kind: 'host', name: 'EMPTY', fallback: '' }],
  ])('%s', (raw, want) => expect(parseEnvTemplate(raw)).toEqual(want));

  it.each(['x${A}', '${A}${B}', '${A:-${B}}', '${1A}', '${A-x}', '${A'])('refuses %s', (raw) => expect(parseEnvTemplate(raw).kind).toBe('invalid'));
});

describe('resolveEnvTemplates', () => {
  const table = { LIT: 'v', TOKEN: '${SECRET}', PORT: '${PORT:-8000}', BLANK: '${BLANK:-default}' };

  it('resolves against the supplied map only, and lists host values for redaction', () => {
    const r = resolveEnvTemplates(table, { SECRET: 's3cr3t-value', BLANK: '', UNRELATED: 'x' });
    expect(r.env).toEqual({ LIT: 'v', TOKEN: 's3cr3t-value', PORT: '8000', BLANK: '' });
    expect(r.redactions).toEqual(['s3cr3t-value']);
    expect(r.fromHost).toEqual(['BLANK', 'SECRET']);
    expect(Object.isFrozen(r.env)).toBe(true);
  });

  it('names every missing variable and no value', () => {
    let err: unknown;
    try {
      resolveEnvTemplates({ A: '${NEED_A}', B: '${NEED_B}', C: '${HAVE}' }, { HAVE: 'topsecret' }, 'verifier.env');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AssayError);
    const e = err as AssayError;
    expect(e.code).toBe(C.ENV_UNRESOLVED);
    expect(e.message).toContain('NEED_A (for verifier.env.A)');
    expect(e.message).toContain('NEED_B (for verifier.env.B)');
    expect(e.message).not.toContain('topsecret');
  });

  it('does not read process.env', () => {
    process.env.ASSAY_TEST_SHOULD_NOT_LEAK = 'leak';
    try {
      expect(() => resolveEnvTemplates({ X: '${ASSAY_TEST_SHOULD_NOT_LEAK}' }, {})).toThrow(AssayError);
    } finally {
      delete process.env.ASSAY_TEST_SHOULD_NOT_LEAK;
    }
  });

  it('merges phase tables over the environment table and lists template names', () => {
    expect(mergeEnv({ A: '1', B: '2' }, { B: '3' })).toEqual({ A: '1', B: '3' });
    expect(templateNames(table)).toEqual(['BLANK', 'PORT', 'SECRET']);
  });
});

describe('redactText', () => {
  it('replaces every occurrence, longest secret first', () => {
    expect(redactText('token=abcdef, again abcdef, part abc', ['abc', 'abcdef'])).toBe(`token=${REDACTED}, again ${REDACTED}, part ${REDACTED}`);
    expect(redactText('nothing here', [])).toBe('nothing here');
  });
});
