/**
 * Progress for long work: drawn on a terminal (stderr is a TTY), silent otherwise.
 * Domain code reports through the `Progress` interface; only edges decide where it goes.
 */
export interface Progress {
  start(label: string, total?: number): void;
  tick(done: number, total?: number): void;
  end(summary?: string): void;
}

export const silentProgress: Progress = { start() {}, tick() {}, end() {} };

export class TerminalProgress implements Progress {
  private label = '';
  private total: number | undefined;
  private lastDraw = 0;
  private readonly startedAt = Date.now();

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {}

  static forStderr(): Progress {
    return process.stderr.isTTY ? new TerminalProgress(process.stderr) : silentProgress;
  }

  start(label: string, total?: number): void {
    this.label = label;
    this.total = total;
    this.draw(0, true);
  }

  tick(done: number, total?: number): void {
    if (total !== undefined) this.total = total;
    this.draw(done, false);
  }

  end(summary?: string): void {
    this.stream.write(`\r\x1b[2K${summary ? `${this.label}: ${summary}\n` : ''}`);
  }

  private draw(done: number, force: boolean): void {
    const now = Date.now();
    if (!force && now - this.lastDraw < 100) return;
    this.lastDraw = now;
    const width = 30;
    const secs = ((now - this.startedAt) / 1000).toFixed(1);
    if (this.total && this.total > 0) {
      const frac = Math.min(1, done / this.total);
      const bar = '#'.repeat(Math.round(frac * width)).padEnd(width, '.');
      this.stream.write(`\r\x1b[2K${this.label} [${bar}] ${done}/${this.total} ${secs}s`);
    } else {
      this.stream.write(`\r\x1b[2K${this.label} ${done} ${secs}s`);
    }
  }
}
