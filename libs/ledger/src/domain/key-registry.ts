/**
 * Which key may sign what, at which position: the state folded from KeyRegistered / KeyRevoked events.
 * `authorize` is the decision (pure), `apply` the evolution. Used alike by the writer (to refuse before signing)
 * and by verification (to check every recorded event).
 *
 * Rules:
 * - position 0 is a KeyRegistered of a controller key signed by that same key: the ledger's trust anchor;
 * - every other KeyRegistered / KeyRevoked is signed by a registered, unrevoked controller key;
 * - a key id is registered once; its text must match the key id it claims;
 * - an event may be signed only by a registered key whose revocation (if any) comes later, and whose role is one
 *   of the roles the catalogue allows for the event's type.
 */
import { CATALOGUE } from './catalogue';
import type { Envelope } from './envelope';
import { isRole, type Role } from './roles';

export interface KeyRecord {
  keyId: string;
  publicKeyText: string;
  publicKey: Uint8Array;
  role: Role;
  registeredAt: number;
  revokedAt: number | null;
}

/** Decodes a verifier key text and returns its key id (`name+hex8`) and 32-byte key, or throws. */
export type VerifierKeyDecoder = (text: string) => { keyId: string; publicKey: Uint8Array };

export interface Problem {
  code: string;
  message: string;
}

export class KeyRegistry {
  private readonly keys = new Map<string, KeyRecord>();

  constructor(private readonly decode: VerifierKeyDecoder) {}

  get(keyId: string): KeyRecord | undefined {
    return this.keys.get(keyId);
  }

  all(): KeyRecord[] {
    return [...this.keys.values()];
  }

  /** The key that signed `e` may sign it at e.position. Does not check the signature bytes. */
  authorize(e: Pick<Envelope, 'type' | 'data' | 'signer' | 'position'>): Problem | null {
    if (e.position === 0) {
      if (e.type !== 'KeyRegistered' || e.data.role !== 'controller' || e.data.keyId !== e.signer)
        return {
          code: 'VERIFY_BAD_GENESIS',
          message: 'position 0 must be a controller key registering itself (KeyRegistered, signed by the key it registers)',
        };
      return this.keyEventProblem(e);
    }
    const key = this.keys.get(e.signer);
    if (!key) return { code: 'VERIFY_UNKNOWN_SIGNER', message: `signer ${e.signer} is not a registered key at position ${e.position}` };
    if (key.revokedAt !== null && key.revokedAt < e.position)
      return { code: 'VERIFY_REVOKED_SIGNER', message: `signer ${e.signer} was revoked at position ${key.revokedAt}` };
    const spec = CATALOGUE.get(e.type);
    if (!spec) return { code: 'VERIFY_UNKNOWN_TYPE', message: `unknown event type "${e.type}"` };
    if (!spec.roles.includes(key.role))
      return {
        code: 'VERIFY_WRONG_ROLE',
        message: `${e.type} must be signed by a key with role ${spec.roles.join(' or ')}; ${e.signer} has role ${key.role}`,
      };
    return this.keyEventProblem(e);
  }

  private keyEventProblem(e: Pick<Envelope, 'type' | 'data' | 'position'>): Problem | null {
    if (e.type === 'KeyRegistered') {
      const { keyId, publicKey, role } = e.data;
      if (typeof keyId !== 'string' || typeof publicKey !== 'string' || !isRole(role))
        return { code: 'VERIFY_BAD_KEY_EVENT', message: 'KeyRegistered needs keyId, publicKey and role' };
      if (this.keys.has(keyId)) return { code: 'VERIFY_BAD_KEY_EVENT', message: `key ${keyId} is registered twice` };
      let decoded: { keyId: string };
      try {
        decoded = this.decode(publicKey);
      } catch (err) {
        return { code: 'VERIFY_BAD_KEY_EVENT', message: `publicKey of ${keyId} is not a valid verifier key: ${(err as Error).message}` };
      }
      if (decoded.keyId !== keyId) return { code: 'VERIFY_BAD_KEY_EVENT', message: `publicKey is for ${decoded.keyId}, but keyId says ${keyId}` };
    } else if (e.type === 'KeyRevoked') {
      const { keyId } = e.data;
      const key = typeof keyId === 'string' ? this.keys.get(keyId) : undefined;
      if (!key) return { code: 'VERIFY_BAD_KEY_EVENT', message: `KeyRevoked names unknown key ${String(keyId)}` };
      if (key.revokedAt !== null) return { code: 'VERIFY_BAD_KEY_EVENT', message: `key ${key.keyId} is revoked twice` };
    }
    return null;
  }

  /** Folds an authorized key event into the state. Other event types are ignored. */
  apply(e: Pick<Envelope, 'type' | 'data' | 'position'>): void {
    if (e.type === 'KeyRegistered') {
      const text = e.data.publicKey as string;
      const { keyId, publicKey } = this.decode(text);
      this.keys.set(keyId, { keyId, publicKeyText: text, publicKey, role: e.data.role as Role, registeredAt: e.position, revokedAt: null });
    } else if (e.type === 'KeyRevoked') {
      const key = this.keys.get(e.data.keyId as string);
      if (key) key.revokedAt = e.position;
    }
  }
}
