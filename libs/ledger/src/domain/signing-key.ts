import type { Role } from './roles';

/**
 * A private key in use by this process. `sign` is Ed25519 over exact bytes (node:crypto on the hot path).
 * The private seed never leaves the object that implements this.
 */
export interface SigningKey {
  /** C2SP key name, e.g. `assay-controller-1a2b3c4d`. */
  name: string;
  /** `<name>+<8 hex key id>`: the `signer` field of envelopes. */
  signer: string;
  /** The 4-byte C2SP key id. */
  keyId: Uint8Array;
  role: Role;
  /** Verifier key text: `<name>+<hex key id>+<base64(0x01 || public key)>`. */
  publicKeyText: string;
  publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}
