// The one shape a chart travels in, from whoever builds it (console/charts.ts, from metric samples) to whatever draws
// it (console/web/charts.js with uPlot): the console's API sends it as JSON, and a run's HTML report embeds it.

/** One line of a chart. `values[i]` belongs to `ChartSpec.x[i]`; null is a gap (no data in that window). */
export interface ChartLine {
  label: string;
  values: (number | null)[];
  /** 'limit' draws a dashed line (the allowance, the SLO): what the other lines are measured against. @default 'line' */
  kind?: 'line' | 'limit';
}

export interface ChartSpec {
  /** Stable within a page: `<job>:<chart>`, e.g. `payment-reconcile:starts`. */
  id: string;
  title: string;
  /** The y axis' unit, e.g. "starts per 60 s", "ms". */
  unit: string;
  /** Epoch seconds, ascending: the start of each window. */
  x: number[];
  lines: ChartLine[];
}
