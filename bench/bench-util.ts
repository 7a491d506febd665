/** Small helpers shared by the benchmarks: timing, percentiles, formatting of figure / baseline / ratio lines. */
export function now(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] as number;
}

export function fmt(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export interface Comparison {
  name: string;
  figure: number;
  baseline: number;
  unit: string;
  /** Minimum ratio figure/baseline for the target (or maximum, when `atMost`). */
  target: number;
  atMost?: boolean;
  baselineName: string;
}

export function report(rows: Comparison[]): boolean {
  let allMet = true;
  for (const r of rows) {
    const ratio = r.figure / r.baseline;
    const met = r.atMost ? ratio <= r.target : ratio >= r.target;
    allMet &&= met;
    console.log(
      `${r.name}: ${fmt(r.figure, r.figure < 100 ? 2 : 0)} ${r.unit} | baseline (${r.baselineName}): ${fmt(r.baseline, r.baseline < 100 ? 2 : 0)} ${r.unit} | ratio ${ratio.toFixed(3)} | target ${r.atMost ? '<=' : '>='} ${r.target} ${met ? 'MET' : 'NOT MET'}`,
    );
  }
  return allMet;
}

export function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return def;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} needs a positive number`);
  return v;
}
