// How much of the allowance a chaos run used where it could: the fleet's starts per window against the rate, outside
// the injected 429 storms and while work was waiting. Pure, so the arithmetic is unit-tested; chaos/run.ts gathers the
// inputs (the fake downstream's arrivals, the storms it planned, the queue depth it sampled).
//
// Why only there: inside a storm every start is refused, so the fleet should not be starting; and with the queue
// drained (the run's tail: deferred copies waiting out their delay, retries waiting for their visibility timeout) there
// is nothing to start. What is left is the time the pacing alone decides: a rate that stays cut after a storm shows
// there as a utilization below 1.

/** A half-open span of epoch milliseconds. */
export type Span = readonly [fromMs: number, toMs: number];

export interface PacingWindow {
  /** Seconds from the first start. */
  fromSeconds: number;
  /** Every start in the window, storm refusals included. */
  starts: number;
  /** The starts outside storms with work waiting: what `allowed` is set against. */
  countedStarts: number;
  /** The allowance over this window's countable time (outside storms, work waiting), in starts. */
  allowed: number;
  /** Milliseconds of the window inside storms. */
  stormMs: number;
  /** Milliseconds of the window outside storms with work waiting: the time its `allowed` counts. */
  countedMs: number;
}

export interface PacingFigures {
  allowancePerSecond: number;
  windowSeconds: number;
  /** Starts, time and utilization over every countable moment of the run (outside storms, work waiting). */
  outsideStorms: { seconds: number; starts: number; allowed: number; utilization: number };
  /** The same per window of `windowSeconds`, from the first start: the time series. */
  windows: PacingWindow[];
}

/** The length of `span` inside `spans` (each list sorted or not; overlapping spans are merged first). */
function overlapMs(span: Span, spans: readonly Span[]): number {
  let total = 0;
  for (const [a, b] of merge(spans)) total += Math.max(0, Math.min(b, span[1]) - Math.max(a, span[0]));
  return total;
}

function merge(spans: readonly Span[]): Span[] {
  const sorted = [...spans].filter(([a, b]) => b > a).sort((x, y) => x[0] - y[0]);
  const out: [number, number][] = [];
  for (const [a, b] of sorted) {
    const last = out[out.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

/** `spans` less `minus`: the parts of each span outside every span of `minus`. */
function subtract(spans: readonly Span[], minus: readonly Span[]): Span[] {
  const cut = merge(minus);
  const out: Span[] = [];
  for (const [a, b] of merge(spans)) {
    let from = a;
    for (const [c, d] of cut) {
      if (d <= from || c >= b) continue;
      if (c > from) out.push([from, c]);
      from = Math.max(from, d);
    }
    if (from < b) out.push([from, b]);
  }
  return out;
}

const inAny = (t: number, spans: readonly Span[]) => spans.some(([a, b]) => t >= a && t < b);
const round = (n: number, digits: number) => Number(n.toFixed(digits));

/**
 * The run's starts against its allowance where pacing alone decided (see the file comment).
 * @param starts epoch ms of every start the downstream saw (storm refusals included; they fall inside storms)
 * @param storms the injected storms, epoch ms
 * @param busy when work was waiting (the job's queue held at least a second's allowance), epoch ms
 */
export function pacingFigures(o: {
  starts: readonly number[];
  storms: readonly Span[];
  busy: readonly Span[];
  allowancePerSecond: number;
  windowSeconds: number;
}): PacingFigures {
  const counted = subtract(o.busy, o.storms);
  const countedStarts = o.starts.filter((t) => inAny(t, counted)).length;
  const countedMs = counted.reduce((sum, [a, b]) => sum + (b - a), 0);
  const allowed = (countedMs / 1000) * o.allowancePerSecond;
  const windows: PacingWindow[] = [];
  if (o.starts.length > 0) {
    const first = Math.min(...o.starts);
    const last = Math.max(...o.starts);
    const width = o.windowSeconds * 1000;
    for (let from = first; from <= last; from += width) {
      const span: Span = [from, from + width];
      const windowCountedMs = overlapMs(span, counted);
      windows.push({
        fromSeconds: round((from - first) / 1000, 1),
        starts: o.starts.filter((t) => t >= span[0] && t < span[1]).length,
        countedStarts: o.starts.filter((t) => t >= span[0] && t < span[1] && inAny(t, counted)).length,
        allowed: round((windowCountedMs / 1000) * o.allowancePerSecond, 1),
        stormMs: overlapMs(span, o.storms),
        countedMs: windowCountedMs,
      });
    }
  }
  return {
    allowancePerSecond: o.allowancePerSecond,
    windowSeconds: o.windowSeconds,
    outsideStorms: {
      seconds: round(countedMs / 1000, 1),
      starts: countedStarts,
      allowed: round(allowed, 1),
      utilization: allowed === 0 ? 0 : round(countedStarts / allowed, 3),
    },
    windows,
  };
}
