// Reads the functions' own CloudWatch embedded-metric (EMF) log lines, as CloudWatch would, so the local report can
// show figures that exist only as metrics: the true job age since first enqueue, which SQS's own age resets on deferral.

/** Largest AgeSinceFirstEnqueue (ms) seen per job. */
export class MetricsTap {
  private readonly maxAgeMs = new Map<string, number>();

  /** Feeds one line a function wrote; lines that are not EMF documents are ignored. */
  observe(line: string): void {
    if (!line.includes('"_aws"')) return;
    let doc: Record<string, unknown>;
    try {
      doc = JSON.parse(line.slice(line.indexOf('{'))) as Record<string, unknown>;
    } catch {
      return;
    }
    const job = doc.job;
    const age = doc.AgeSinceFirstEnqueue;
    // Powertools writes a single value, or an array when several were added before one flush.
    const ages = (Array.isArray(age) ? age : [age]).filter((v): v is number => typeof v === 'number');
    if (typeof job !== 'string' || ages.length === 0) return;
    this.maxAgeMs.set(job, Math.max(this.maxAgeMs.get(job) ?? 0, ...ages));
  }

  /** The oldest operation's age at completion, in ms; undefined when no operation of the job completed. */
  maxJobAgeMs(job: string): number | undefined {
    return this.maxAgeMs.get(job);
  }
}
