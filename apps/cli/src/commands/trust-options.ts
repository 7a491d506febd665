import { AssayError } from '@assay/core';
import type { WitnessPolicy } from '@assay/ledger';
import { libs } from '../libs';
import { keyText } from './checkpoint.commands';

/**
 * What an auditor trusts, from the options `assay verify` and `assay rejudge` share: `--trusted-key KEY...` (verifier
 * key texts or .pub files), `--trusted-keys FILE` (one per line, # comments) and `--witness-policy FILE`.
 */
export interface TrustOptions {
  trustedKey?: string[];
  trustedKeys?: string;
  witnessPolicy?: string;
}

const usage = (message: string) => new AssayError('CLI_USAGE', 'invalid_input', message);

/** The trusted keys' texts, each checked to be a verifier key. */
export function trustedKeysOf(o: TrustOptions): string[] {
  const trusted = (o.trustedKey ?? []).map((k) => keyText(k, 'trusted key'));
  if (o.trustedKeys !== undefined)
    trusted.push(
      ...keyText(o.trustedKeys, 'trusted keys')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l !== '' && !l.startsWith('#')),
    );
  const { parseVerifierKey } = libs.ledger();
  for (const k of trusted) {
    try {
      parseVerifierKey(k);
    } catch (e) {
      throw usage(`--trusted-key: "${k.slice(0, 80)}" is not a verifier key (name+hex+base64): ${(e as Error).message}`);
    }
  }
  return trusted;
}

/** The witness policy of `--witness-policy FILE`, or undefined. */
export function witnessPolicyOf(o: TrustOptions): WitnessPolicy | undefined {
  if (o.witnessPolicy === undefined) return undefined;
  const text = keyText(o.witnessPolicy, 'witness policy');
  try {
    return libs.ledger().parseWitnessPolicy(text);
  } catch (e) {
    throw new AssayError('BUNDLE_BAD_WITNESS_POLICY', 'invalid_input', `--witness-policy ${o.witnessPolicy}: ${(e as Error).message}`);
  }
}
