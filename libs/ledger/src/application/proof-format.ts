/**
 * C2SP tlog-proof (c2sp.org/tlog-proof@v1) text for an inclusion proof:
 *
 *   c2sp.org/tlog-proof@v1
 *   index <decimal position>
 *   <base64 hash>            one line per proof hash, leaf side first (RFC 9162 order)
 *   <blank line>
 *   <the signed checkpoint note the proof is against>
 */
import { AssayError } from '@assay/core';
import type { InclusionProofResult } from './ledger';

export const TLOG_PROOF_HEADER = 'c2sp.org/tlog-proof@v1';

export function formatInclusionProof(p: Pick<InclusionProofResult, 'position' | 'proof' | 'checkpoint'>): string {
  return `${TLOG_PROOF_HEADER}\nindex ${p.position}\n${p.proof.map((h) => `${h}\n`).join('')}\n${p.checkpoint}`;
}

export function parseInclusionProof(text: string): { position: number; proof: Buffer[]; checkpoint: string } {
  const bad = (m: string): AssayError => new AssayError('PROOF_MALFORMED', 'invalid_input', `tlog-proof: ${m}`);
  if (text.length > 64 * 1024) throw bad('larger than 64 KiB');
  const split = text.indexOf('\n\n');
  if (split < 0) throw bad('no blank line before the checkpoint');
  const lines = text.slice(0, split).split('\n');
  if (lines[0] !== TLOG_PROOF_HEADER) throw bad(`first line must be "${TLOG_PROOF_HEADER}"`);
  let i = 1;
  if (lines[i]?.startsWith('extra ')) i++;
  const m = /^index (0|[1-9]\d{0,15})$/.exec(lines[i] ?? '');
  if (!m) throw bad(`line ${i + 1} must be "index <decimal>"`);
  const proof = lines.slice(i + 1).map((l, k) => {
    if (!/^[A-Za-z0-9+/]{43}=$/.test(l)) throw bad(`line ${i + 2 + k} is not a base64 SHA-256 hash`);
    return Buffer.from(l, 'base64');
  });
  return { position: Number(m[1]), proof, checkpoint: text.slice(split + 2) };
}
