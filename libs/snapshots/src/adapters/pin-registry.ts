import * as fs from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { CID } from 'multiformats/cid';
import { fsyncDirectory, writeFileAtomic } from '@assay/core';
import { ioError } from '../domain/snapshot.errors';
import type { PinRecord } from '../ports/blob-store.port';

/**
 * The pins (GC roots) and heads of the blob store on disk: `<dir>/roots/<cid>.json`, one pin record a root, and
 * `<dir>/heads/<sha256 of the source>.json`, the last snapshot per source label. Each is written atomically.
 */
export class PinRegistry {
  constructor(
    private readonly dir: string,
    private readonly durable: boolean,
  ) {}

  private pinPath(cid: string): string {
    return join(this.dir, 'roots', `${cid}.json`);
  }

  private headPath(source: string): string {
    const name = createHash('sha256').update(source).digest('hex');
    return join(this.dir, 'heads', `${name}.json`);
  }

  writePin(rec: PinRecord): void {
    writeFileAtomic(this.pinPath(rec.cid), `${JSON.stringify(rec)}\n`, { durable: this.durable });
  }

  writeHead(source: string, cid: string): void {
    writeFileAtomic(this.headPath(source), `${JSON.stringify({ source, cid })}\n`, { durable: this.durable });
  }

  /** Removes a pin; false if there was none. */
  unpin(cid: CID): boolean {
    try {
      fs.unlinkSync(this.pinPath(cid.toString()));
      if (this.durable) fsyncDirectory(join(this.dir, 'roots'));
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw ioError('unpinning', cid.toString(), e);
    }
  }

  /** Every pin, sorted by file name; a damaged record still pins its CID. */
  pins(): PinRecord[] {
    const out: PinRecord[] = [];
    for (const name of fs.readdirSync(join(this.dir, 'roots')).sort()) {
      if (!name.endsWith('.json')) continue;
      const cid = name.slice(0, -5);
      let rec: Partial<PinRecord> = {};
      try {
        rec = JSON.parse(fs.readFileSync(join(this.dir, 'roots', name), 'utf8')) as Partial<PinRecord>;
      } catch {
        // A damaged pin record still pins its CID.
      }
      out.push({
        cid,
        createdAt: typeof rec.createdAt === 'string' ? rec.createdAt : '',
        source: typeof rec.source === 'string' ? rec.source : null,
        origin: rec.origin === 'import' || rec.origin === 'pin' ? rec.origin : 'snapshot',
      });
    }
    return out;
  }

  /** The last snapshot recorded for a source label, or null. */
  head(source: string): string | null {
    try {
      const h = JSON.parse(fs.readFileSync(this.headPath(source), 'utf8')) as { source?: unknown; cid?: unknown };
      return h.source === source && typeof h.cid === 'string' ? h.cid : null;
    } catch {
      return null;
    }
  }
}
