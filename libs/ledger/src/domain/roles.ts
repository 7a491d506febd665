/** Who may sign what. Keys are registered in the ledger itself with exactly one role. */
export const ROLES = ['controller', 'runtime', 'judge', 'auditor'] as const;
export type Role = (typeof ROLES)[number];

export function isRole(v: unknown): v is Role {
  return typeof v === 'string' && (ROLES as readonly string[]).includes(v);
}
