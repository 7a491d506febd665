/**
 * tweetnacl as an Ed25519 implementation behind the same strict pre-check as node:crypto's (`ed25519Problem`): the
 * independent second implementation the tests cross-check the hot path against (libs/ledger/src/crypto/ed25519.ts).
 * Test-only: tweetnacl is a dev dependency and nothing that ships loads it.
 */
import nacl from 'tweetnacl';
import { ed25519Problem, requireSeed, type Ed25519 } from '../../libs/ledger/src/crypto/ed25519';

export const naclEd25519: Ed25519 = {
  name: 'tweetnacl',
  sign(seed, message) {
    requireSeed(seed);
    const kp = nacl.sign.keyPair.fromSeed(new Uint8Array(seed));
    try {
      return nacl.sign.detached(message, kp.secretKey);
    } finally {
      kp.secretKey.fill(0);
    }
  },
  verify(pub, message, sig) {
    if (ed25519Problem(pub, message, sig) !== null) return false;
    try {
      return nacl.sign.detached.verify(message, sig, pub);
    } catch {
      return false;
    }
  },
  publicKeyFromSeed(seed) {
    requireSeed(seed);
    const kp = nacl.sign.keyPair.fromSeed(new Uint8Array(seed));
    kp.secretKey.fill(0);
    return kp.publicKey;
  },
};
