/**
 * Who may sign what. Keys are registered in the ledger itself with exactly one role. `publisher` signs no event: it
 * signs result claims (the DSSE envelope of a bundle, docs/bundle-format.md), as the controller key may too.
 */
export const ROLES = ['controller', 'runtime', 'judge', 'auditor', 'publisher'] as const;
export type Role = (typeof ROLES)[number];

export function isRole(v: unknown): v is Role {
  return typeof v === 'string' && (ROLES as readonly string[]).includes(v);
}
