/**
 * Who owns a container, volume or work directory: a process on a host. Leftovers whose owner is gone (killed,
 * crashed, machine rebooted) are swept at the next start. The process adapter identifies an owner by host, pid and
 * the process's start time, so a reused pid is not mistaken for the owner.
 */
export interface OwnerRegistry {
  /** This process, as recorded in labels. */
  readonly self: string;
  /** False when the owner is certainly gone; true when alive or when this host cannot tell (another host). */
  isAlive(owner: string): boolean;
}
