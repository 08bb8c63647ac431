// A job without a local fixture is judged on the pipeline's own record: which operations the consumer completed (its
// structured log lines, cross-checked with the idempotency store) and when each apply began. These are the pipeline's
// counts, not the downstream's: a downstream that applied an effect twice behind one completed apply is invisible
// here, which is what a fixture is for. The report says so.
import { BatchGetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { idempotencyRecordId } from '../lambda/core/idempotencyKey';
import type { EffectReading } from './fixture';

interface Completion {
  operationId: string;
  at: number;
}

interface LogLine {
  message?: unknown;
  operationId?: unknown;
  applyStartedAt?: unknown;
  cause?: unknown;
  timestamp?: unknown;
}

/** Powertools' record status of an applied operation. */
const COMPLETED = 'COMPLETED';
/** BatchGetItem's limit of keys per request. */
const KEYS_PER_REQUEST = 100;

export class PipelineLog {
  private readonly completions = new Map<string, Completion[]>();
  /** Apply starts by function, then by operation ID (epoch ms). */
  private readonly starts = new Map<string, Map<string, number[]>>();

  /** Feeds one line a function wrote (`source`: the function's name); lines that are not the consumer's JSON are ignored. */
  observe(source: string, line: string): void {
    if (!line.includes('"operationId"')) return;
    let doc: LogLine;
    try {
      doc = JSON.parse(line.slice(line.indexOf('{'))) as LogLine;
    } catch {
      return;
    }
    if (typeof doc.operationId !== 'string') return;
    const at =
      typeof doc.applyStartedAt === 'number'
        ? doc.applyStartedAt
        : typeof doc.timestamp === 'string'
          ? Date.parse(doc.timestamp)
          : Date.now();
    // An apply began: it completed, failed after calling, or was throttled by the downstream.
    const began =
      typeof doc.applyStartedAt === 'number' || (doc.message === 'message deferred' && doc.cause === 'throttled');
    if (began) {
      const byOperation = this.starts.get(source) ?? new Map<string, number[]>();
      this.starts.set(source, byOperation);
      const list = byOperation.get(doc.operationId) ?? [];
      byOperation.set(doc.operationId, list);
      list.push(at);
    }
    if (doc.message === 'operation completed') {
      const list = this.completions.get(source) ?? [];
      this.completions.set(source, list);
      list.push({ operationId: doc.operationId, at });
    }
  }

  /** When each operation's applies began (epoch ms), for one function, from `since` on. */
  startsByOperation(functionName: string | undefined, since = 0): Map<string, number[]> {
    const out = new Map<string, number[]>();
    for (const [id, starts] of this.starts.get(functionName ?? '') ?? []) {
      const kept = starts.filter((at) => at >= since);
      if (kept.length > 0) out.set(id, kept);
    }
    return out;
  }

  /**
   * The consumer's completed applies per operation ID, each checked against its idempotency record: a completion whose
   * record is not COMPLETED is reported as unexpected (the log and the store disagree).
   */
  async effects(
    consumerName: string | undefined,
    store: { documents: DynamoDBDocumentClient; jobName: string; idempotencyTable?: string },
    since = 0,
  ): Promise<EffectReading> {
    const completions = (consumerName ? (this.completions.get(consumerName) ?? []) : []).filter((c) => c.at >= since);
    const effectsByOperation = new Map<string, number>();
    for (const c of completions)
      effectsByOperation.set(c.operationId, (effectsByOperation.get(c.operationId) ?? 0) + 1);
    const unexpectedEffects: string[] = [];
    if (store.idempotencyTable && effectsByOperation.size > 0) {
      const completed = await completedRecords(store.documents, store.idempotencyTable, store.jobName, [
        ...effectsByOperation.keys(),
      ]);
      for (const id of effectsByOperation.keys())
        if (!completed.has(id))
          unexpectedEffects.push(
            `${id}: completed in the consumer's log, but its idempotency record is not ${COMPLETED}`,
          );
    }
    return {
      effectsByOperation,
      starts: [...this.startsByOperation(consumerName, since).values()].flat(),
      unexpectedEffects,
    };
  }
}

/** The operation IDs whose idempotency record is COMPLETED (consistent reads, 100 keys a request). */
async function completedRecords(
  documents: DynamoDBDocumentClient,
  table: string,
  jobName: string,
  operationIds: string[],
): Promise<Set<string>> {
  const byRecord = new Map(operationIds.map((id) => [idempotencyRecordId(jobName, id), id]));
  const done = new Set<string>();
  const ids = [...byRecord.keys()];
  for (let i = 0; i < ids.length; i += KEYS_PER_REQUEST) {
    let keys: Record<string, unknown>[] | undefined = ids.slice(i, i + KEYS_PER_REQUEST).map((id) => ({ id }));
    for (let attempt = 0; keys && keys.length > 0 && attempt < 10; attempt++) {
      const out = await documents.send(
        new BatchGetCommand({ RequestItems: { [table]: { Keys: keys, ConsistentRead: true } } }),
      );
      for (const item of out.Responses?.[table] ?? [])
        if (item.status === COMPLETED) done.add(byRecord.get(String(item.id))!);
      keys = out.UnprocessedKeys?.[table]?.Keys as Record<string, unknown>[] | undefined;
    }
  }
  return done;
}
