import { createHash } from 'node:crypto';
import { AssayError } from '@assay/core';
import { protocolFingerprint, protocolFingerprintInput, PROTOCOL_FINGERPRINT_SCHEME } from './fingerprint';
import { mergeRunSettings } from './run-settings';

// Stands in for RFC 8785 on these inputs (ASCII strings, integers, null): sorted keys, no whitespace.
function canon(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canon).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canon(o[k])}`)
    .join(',')}}`;
}

const IMG = `sha256:${'a'.repeat(64)}`;
const base = { taskDigest: 'bafytask', judgeImageDigest: IMG, settings: mergeRunSettings({ maxSubmissions: 5 }), harnessVersion: 'assay/0.1.0' };

describe('protocol fingerprint', () => {
  it('is SHA-256 over the canonical JSON of a plain object', () => {
    const input = protocolFingerprintInput(base);
    expect(input).toEqual({
      scheme: PROTOCOL_FINGERPRINT_SCHEME,
      taskDigest: 'bafytask',
      judgeImageDigest: IMG,
      budgets: { maxSubmissions: 5, cooldownSec: 0, timeBudgetSec: null, gpuBudgetSec: null },
      metric: null,
      direction: 'maximize',
      harnessVersion: 'assay/0.1.0',
    });
    const text =
      `{"budgets":{"cooldownSec":0,"gpuBudgetSec":null,"maxSubmissions":5,"timeBudgetSec":null},"direction":"maximize",` +
      `"harnessVersion":"assay/0.1.0","judgeImageDigest":"${IMG}","metric":null,"scheme":"${PROTOCOL_FINGERPRINT_SCHEME}","taskDigest":"bafytask"}`;
    expect(canon(input)).toBe(text);
    expect(protocolFingerprint(input, canon)).toBe(`sha256:${createHash('sha256').update(text).digest('hex')}`);
  });

  it('changes with every component', () => {
    const fp = (over: Partial<typeof base>) => protocolFingerprint(protocolFingerprintInput({ ...base, ...over }), canon);
    const all = [
      fp({}),
      fp({ taskDigest: 'bafyother' }),
      fp({ judgeImageDigest: `sha256:${'b'.repeat(64)}` }),
      fp({ harnessVersion: 'assay/0.2.0' }),
      fp({ settings: mergeRunSettings({ maxSubmissions: 6 }) }),
      fp({ settings: mergeRunSettings({ maxSubmissions: 5, direction: 'minimize' }) }),
      fp({ settings: mergeRunSettings({ maxSubmissions: 5, primaryMetric: 'acc' }) }),
      fp({ settings: mergeRunSettings({ maxSubmissions: 5, gpuBudgetSec: 3600 }) }),
    ];
    expect(new Set(all).size).toBe(all.length);
  });

  it('refuses malformed input', () => {
    expect(() => protocolFingerprintInput({ ...base, judgeImageDigest: 'latest' })).toThrow(AssayError);
    expect(() => protocolFingerprintInput({ ...base, taskDigest: '' })).toThrow(/taskDigest/);
    expect(() => protocolFingerprintInput({ ...base, settings: { ...base.settings, timeBudgetSec: Infinity } })).toThrow(/timeBudgetSec/);
  });
});
