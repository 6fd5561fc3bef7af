/** Small helpers shared by the benchmarks: percentiles and aligned printing. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

export const median = (values: number[]) => percentile(values, 50);

export function row(label: string, values: number[], unit = 'ms'): string {
  return `${label.padEnd(44)} p50 ${median(values).toFixed(1).padStart(8)} ${unit}   p95 ${percentile(values, 95).toFixed(1).padStart(8)} ${unit}   n=${values.length}`;
}
