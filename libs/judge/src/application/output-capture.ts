/**
 * The Judge's output (stdout and stderr interleaved as they arrive) kept in a log file up to a cap; everything
 * beyond is counted and dropped, so a flood costs the host nothing but reading it. The digest recorded in
 * JudgeCompleted is the SHA-256 of the log file's exact bytes (the kept part), so anyone holding the log can check it;
 * `outputBytes` is everything the Judge wrote, kept or not.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';

export interface CapturedOutput {
  readonly path: string;
  /** Every byte the Judge wrote. */
  readonly totalBytes: number;
  /** Bytes kept in the log file. */
  readonly keptBytes: number;
  readonly truncated: boolean;
  /** `sha256:<hex>` of the log file. */
  readonly digest: string;
}

export class OutputCapture {
  private readonly fd: number;
  private readonly hash = createHash('sha256');
  private total = 0;
  private kept = 0;
  private closed = false;
  private tail: Buffer = Buffer.alloc(0);

  constructor(
    readonly path: string,
    private readonly capBytes: number,
  ) {
    this.fd = fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o640);
  }

  /** The first bytes of the output (for the entrypoint's setup marker). */
  get head(): string {
    return this.tail.toString('utf8');
  }

  write(chunk: Buffer): void {
    this.total += chunk.length;
    if (this.closed || this.kept >= this.capBytes) return;
    const part = chunk.length <= this.capBytes - this.kept ? chunk : chunk.subarray(0, this.capBytes - this.kept);
    let off = 0;
    while (off < part.length) off += fs.writeSync(this.fd, part, off, part.length - off);
    this.hash.update(part);
    this.kept += part.length;
    if (this.tail.length < 256) this.tail = Buffer.concat([this.tail, part.subarray(0, 256 - this.tail.length)]);
  }

  finish(): CapturedOutput {
    if (!this.closed) {
      this.closed = true;
      fs.fsyncSync(this.fd);
      fs.closeSync(this.fd);
    }
    return {
      path: this.path,
      totalBytes: this.total,
      keptBytes: this.kept,
      truncated: this.total > this.kept,
      digest: `sha256:${this.hash.copy().digest('hex')}`,
    };
  }
}
