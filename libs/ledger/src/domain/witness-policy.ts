/**
 * Witness policies: which cosigners a verifier trusts for a log, and how many of them must have cosigned a checkpoint
 * (docs/formats.md, "Witness policies"). A policy file is one JSON object:
 *
 *   {"format": "assay-witness-policy/v1", "quorum": 2, "witnesses": ["<verifier key text>", ...]}
 *
 * Each witness is a C2SP verifier key text, `<name>+<8 hex key ID>+<base64(type || 32-byte Ed25519 key)>`: type 0x04
 * (a tlog-cosignature key) as is, or type 0x01 (the `.pub` of an `assay keys generate --role auditor` key), which is
 * read as the cosigner of the same name and public key (its cosignature key ID is computed with type 0x04). The
 * quorum is 1..number of witnesses; keys must be distinct.
 *
 * checkWitnessPolicy reports, for a checkpoint note: the policy witnesses whose cosignature verifies (they count), the
 * policy witnesses whose cosignature line is there but does not verify (they do not count), the policy witnesses
 * with no line, and the cosignature-shaped lines (72 signature bytes) of keys outside the policy (ignored). It does not
 * check the log's own signature: open the checkpoint with the log key first.
 */
import { parseVerifierKey } from '../crypto/keys';
import { parseCheckpointBody } from './checkpoint';
import { COSIGNATURE_BYTES, cosignatureKeyId, verifyCosignature, type CosignerKey } from './cosignature';
import { parseNote, type ParsedNote } from './note';
import { witnessError } from './witness-errors';

export const WITNESS_POLICY_FORMAT = 'assay-witness-policy/v1';
export const MAX_POLICY_WITNESSES = 64;

export interface PolicyWitness extends CosignerKey {
  /** `<name>+<8 hex cosignature key ID>`. */
  signer: string;
  /** The key text as the policy gave it. */
  text: string;
}

export interface WitnessPolicy {
  quorum: number;
  witnesses: PolicyWitness[];
}

export interface WitnessPolicyResult {
  quorum: number;
  /** Policy witnesses whose cosignature verifies. */
  cosigned: Array<{ signer: string; timestamp: number }>;
  /** Policy witnesses with a cosignature line that does not verify. */
  invalid: Array<{ signer: string; code: string; message: string }>;
  /** Policy witnesses without a cosignature line. */
  missing: string[];
  /** Cosignature-shaped lines of keys outside the policy: ignored, they never count. */
  outside: string[];
  met: boolean;
}

/** A cosigner key from a verifier key text (type 0x04, or 0x01 read as the same key cosigning). */
export function cosignerFromKeyText(text: string): PolicyWitness {
  const k = parseVerifierKey(text.trim());
  const keyId = cosignatureKeyId(k.name, k.publicKey);
  return { name: k.name, publicKey: k.publicKey, signer: `${k.name}+${keyId.toString('hex')}`, text: k.text };
}

/** Parses a policy file's text (JSON; see the module comment). */
export function parseWitnessPolicy(text: string): WitnessPolicy {
  const bad = (m: string) => witnessError('WITNESS_POLICY_MALFORMED', `witness policy: ${m}`);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw bad(`not valid JSON: ${(e as Error).message}`);
  }
  const o = v as { format?: unknown; quorum?: unknown; witnesses?: unknown } | null;
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw bad('must be a JSON object');
  if (o.format !== WITNESS_POLICY_FORMAT) throw bad(`"format" must be "${WITNESS_POLICY_FORMAT}"`);
  if (!Array.isArray(o.witnesses) || o.witnesses.length === 0 || o.witnesses.length > MAX_POLICY_WITNESSES)
    throw bad(`"witnesses" must be an array of 1 to ${MAX_POLICY_WITNESSES} verifier key texts`);
  const witnesses = o.witnesses.map((w, i) => {
    if (typeof w !== 'string') throw bad(`witnesses[${i}] must be a verifier key text`);
    try {
      return cosignerFromKeyText(w);
    } catch (e) {
      throw bad(`witnesses[${i}]: ${(e as Error).message}`);
    }
  });
  const seen = new Set<string>();
  for (const w of witnesses) {
    const pub = Buffer.from(w.publicKey).toString('hex');
    if (seen.has(w.signer) || seen.has(pub)) throw bad(`witness ${w.signer} is listed twice (by name and key ID, or by public key)`);
    seen.add(w.signer).add(pub);
  }
  if (typeof o.quorum !== 'number' || !Number.isInteger(o.quorum) || o.quorum < 1 || o.quorum > witnesses.length)
    throw bad(`"quorum" must be an integer from 1 to ${witnesses.length} (the number of witnesses)`);
  return { quorum: o.quorum, witnesses };
}

/** Which policy witnesses cosigned the checkpoint note, and whether the quorum is met. Throws only for a malformed note. */
export function checkWitnessPolicy(note: string | Uint8Array | ParsedNote, policy: WitnessPolicy): WitnessPolicyResult {
  const parsed = typeof note === 'object' && !(note instanceof Uint8Array) ? note : parseNote(note);
  parseCheckpointBody(parsed.body);
  const result: WitnessPolicyResult = { quorum: policy.quorum, cosigned: [], invalid: [], missing: [], outside: [], met: false };
  const inPolicy = new Set(policy.witnesses.map((w) => w.signer));
  for (const w of policy.witnesses) {
    const [name, idHex] = w.signer.split('+') as [string, string];
    if (!parsed.signatures.some((s) => s.name === name && s.keyIdHex === idHex)) {
      result.missing.push(w.signer);
      continue;
    }
    try {
      const v = verifyCosignature(parsed, w);
      result.cosigned.push({ signer: w.signer, timestamp: v.timestamp });
    } catch (e) {
      const err = e as { code?: string; message: string };
      result.invalid.push({ signer: w.signer, code: err.code ?? 'COSIGNATURE_BAD_SIGNATURE', message: err.message });
    }
  }
  for (const s of parsed.signatures) {
    const id = `${s.name}+${s.keyIdHex}`;
    if (!inPolicy.has(id) && s.signature.byteLength === COSIGNATURE_BYTES) result.outside.push(id);
  }
  result.met = result.cosigned.length >= policy.quorum;
  return result;
}
