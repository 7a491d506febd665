/**
 * Checkpoint signing and proofs of the Ledger over the memory adapters (with their write lock): a revoked
 * controller key signs nothing, read-only proofs never sign or write, and the witness is written inside the lock.
 */
import { ManualClock, SequentialIds, isAssayError } from '@assay/core';
import {
  Ledger,
  MemoryCheckpointStore,
  MemoryEventStore,
  MemoryLedgerLock,
  MemoryMerkleNodeStore,
  generateKeyPair,
  parseCheckpointBody,
  parseNote,
  toSigningKey,
  verifyInclusion,
  type CheckpointWitness,
  type SigningKey,
  type WitnessedCheckpoint,
} from '@assay/ledger';

const controller = toSigningKey(generateKeyPair('controller'));
const controller2 = toSigningKey(generateKeyPair('controller'));
const runtime = toSigningKey(generateKeyPair('runtime'));

class MemoryWitness implements CheckpointWitness {
  saved: WitnessedCheckpoint | null = null;
  failNext = false;
  load() {
    return this.saved;
  }
  save(cp: WitnessedCheckpoint) {
    if (this.failNext) {
      this.failNext = false;
      throw new Error('disk full');
    }
    this.saved = cp;
  }
}

/** An inclusion proof as the Ledger hands it out verifies against the root its own signed checkpoint names. */
function provesAgainstItsCheckpoint(p: { checkpoint: string; treeSize: number; leafHash: string; proof: string[] }, position: number): boolean {
  const root = parseCheckpointBody(parseNote(p.checkpoint).body).rootHash;
  return verifyInclusion(
    position,
    p.treeSize,
    Buffer.from(p.leafHash, 'base64'),
    p.proof.map((h) => Buffer.from(h, 'base64')),
    root,
  );
}

function setup(keys: SigningKey[] = [controller, runtime]) {
  const store = new MemoryEventStore();
  const merkle = new MemoryMerkleNodeStore();
  const checkpoints = new MemoryCheckpointStore();
  const witness = new MemoryWitness();
  const lock = new MemoryLedgerLock(store, [merkle, checkpoints]);
  const make = (k: SigningKey[]) =>
    new Ledger({
      store,
      merkle,
      checkpoints,
      witness,
      lock,
      keys: k,
      clock: new ManualClock('2026-05-01T00:00:00.000Z'),
      ids: new SequentialIds(),
      origin: 'assay.test/checkpoint',
    });
  return { store, merkle, checkpoints, witness, ledger: make(keys), make };
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (e) {
    return isAssayError(e) ? e.code : `not an AssayError: ${String(e)}`;
  }
  return undefined;
}

const note = (i: number) => ({ type: 'Note', data: { text: `note ${i}` } });

describe('Ledger checkpoints', () => {
  it('refuses to sign with a controller key the ledger has revoked (LEDGER_KEY_REVOKED), and signs with another one', async () => {
    const t = setup([controller, controller2, runtime]);
    await t.ledger.genesis();
    await t.ledger.registerKey(controller2);
    await t.ledger.registerKey(runtime);
    const first = await t.ledger.checkpoint();
    expect(first.note).toContain(`— ${controller.name} `);
    await t.ledger.append(Ledger.keyStream(controller.name), [{ type: 'KeyRevoked', data: { keyId: controller.signer, reason: 'rotated' } }], 'stream_exists');
    await t.ledger.append('note-x', [note(1)]);
    // This Ledger holds a second controller key: it signs with that one.
    const second = await t.ledger.checkpoint();
    expect(second.note).toContain(`— ${controller2.name} `);
    expect(second.note).not.toContain(controller.name);
    // A process holding only the revoked key refuses, whether it scanned the log before the revocation or not.
    const onlyOld = t.make([controller]);
    await t.ledger.append('note-x', [note(2)]);
    expect(await codeOf(onlyOld.checkpoint())).toBe('LEDGER_KEY_REVOKED');
    const early = setup([controller, runtime]);
    await early.ledger.genesis();
    await early.ledger.registerKey(runtime);
    await early.ledger.checkpoint();
    await early.ledger.append(Ledger.keyStream(controller.name), [{ type: 'KeyRevoked', data: { keyId: controller.signer, reason: 'lost' } }], 'stream_exists');
    let err: unknown;
    try {
      await early.ledger.checkpoint();
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'LEDGER_KEY_REVOKED', kind: 'refused', details: { signer: controller.signer, revokedAt: 2 } });
    expect((err as Error).message).toMatch(/revoked at position 2/);
    expect(early.checkpoints.all()).toHaveLength(1);
    expect(early.witness.saved?.treeSize).toBe(2);
  });

  it('read-only proofs never sign: an uncovered position is LEDGER_NOT_CHECKPOINTED and nothing is written', async () => {
    const t = setup();
    await t.ledger.genesis();
    await t.ledger.registerKey(runtime);
    await t.ledger.checkpoint();
    await t.ledger.append('note-x', [note(1), note(2), note(3)]);
    const leavesBefore = t.merkle.leafCount();
    const err = await t.ledger.inclusionProof(3).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'LEDGER_NOT_CHECKPOINTED', kind: 'conflict', details: { position: 3, checkpointSize: 2 } });
    expect((err as Error).message).toMatch(/POST \/ledger\/checkpoints/);
    expect(t.checkpoints.all()).toHaveLength(1);
    expect(t.merkle.leafCount()).toBe(leavesBefore);
    // A covered position is proved against the latest signed checkpoint, and the proof verifies.
    const p = await t.ledger.inclusionProof(1);
    expect(p.treeSize).toBe(2);
    expect(provesAgainstItsCheckpoint(p, 1)).toBe(true);
    // Consistency proofs and roots over events not yet indexed are computed in memory, not stored.
    const c = await t.ledger.consistencyProof(2);
    expect(c.size2).toBe(5);
    expect(Buffer.from(await t.ledger.root()).toString('base64')).toBe(c.root2);
    expect(t.merkle.leafCount()).toBe(leavesBefore);
    // Signing on demand is the caller's explicit choice (the CLI's `prove`).
    const signed = await t.ledger.inclusionProof(3, { signIfNeeded: true });
    expect(signed.treeSize).toBe(5);
    expect(t.checkpoints.all()).toHaveLength(2);
    expect(signed.checkpoint).toBe(t.checkpoints.latest()?.note);
  });

  it('a witness that cannot be written fails the checkpoint and leaves the store as it was', async () => {
    const t = setup();
    await t.ledger.genesis();
    await t.ledger.registerKey(runtime);
    await t.ledger.checkpoint();
    await t.ledger.append('note-x', [note(1)]);
    t.witness.failNext = true;
    await expect(t.ledger.checkpoint()).rejects.toThrow('disk full');
    expect(t.checkpoints.all().map((c) => c.treeSize)).toEqual([2]);
    expect(t.witness.saved?.treeSize).toBe(2);
    const again = await t.ledger.checkpoint();
    expect(again).toMatchObject({ treeSize: 3, fresh: true });
    expect(t.checkpoints.all().map((c) => c.treeSize)).toEqual([2, 3]);
    expect(t.witness.saved?.note).toBe(again.note);
  });

  it('a witness one checkpoint ahead of the store (a crash between the two writes) is taken over, not re-signed', async () => {
    const t = setup();
    await t.ledger.genesis();
    await t.ledger.registerKey(runtime);
    await t.ledger.checkpoint();
    await t.ledger.append('note-x', [note(1)]);
    // Simulate the crash: the witness saw the checkpoint of size 3, the store never committed it.
    const undo = t.checkpoints.savepoint();
    const signed = await t.ledger.checkpoint();
    undo();
    expect(t.checkpoints.latest()?.treeSize).toBe(2);
    expect(t.witness.saved?.treeSize).toBe(3);
    const next = await t.ledger.checkpoint();
    expect(next).toMatchObject({ treeSize: 3, fresh: false, note: signed.note });
    expect(t.checkpoints.latest()).toMatchObject({ treeSize: 3, note: signed.note });
  });

  it("read-only proofs never use a witness ahead of the committed Merkle nodes (another process's signing, not yet committed)", async () => {
    const t = setup();
    await t.ledger.genesis();
    await t.ledger.registerKey(runtime);
    await t.ledger.checkpoint();
    await t.ledger.append('note-x', [note(1), note(2)]);
    // Another process is inside its signing transaction: the witness is written, the nodes and the row are not.
    const undoCheckpoints = t.checkpoints.savepoint();
    const undoNodes = t.merkle.savepoint();
    await t.ledger.checkpoint();
    undoNodes();
    undoCheckpoints();
    expect(t.witness.saved?.treeSize).toBe(4);
    expect(t.merkle.leafCount()).toBe(2);
    const reader = t.make([]);
    const p = await reader.inclusionProof(1);
    expect(p.treeSize).toBe(2);
    expect(provesAgainstItsCheckpoint(p, 1)).toBe(true);
    await expect(reader.inclusionProof(3)).rejects.toMatchObject({ code: 'LEDGER_NOT_CHECKPOINTED' });
    await expect(reader.consistencyProof(1, 4)).resolves.toMatchObject({ size1: 1, size2: 4 });
  });
});
