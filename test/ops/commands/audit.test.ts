import { PERSISTENCE_ATTRIBUTE_KEY_MAPPINGS as ATTR } from '@aws-lambda-powertools/idempotency';
import { BatchGetCommand, type BatchGetCommandOutput, PutCommand } from '@aws-sdk/lib-dynamodb';
import {
  type AdmissionStatus,
  DynamoRunStateStore,
  type InvalidRowRecord,
} from '../../../lambda/adapters/admissionState';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { idempotencyRecordId } from '../../../lambda/core/idempotencyKey';
import { deadLetterEntry, ledgerEntry } from '../../../lambda/core/ledgerContract';
import { createClients } from '../../../ops/clients';
import { type AuditResult, renderAudit } from '../../../ops/commands/audit';
import type { OpsIo } from '../../../ops/io';
import { runOps } from '../../../ops/program';
import { type OpsFixture, startOpsFixture } from '../fixture';

describe('Function: renderAudit', () => {
  const result: AuditResult = {
    ok: true,
    command: 'audit',
    job: 'payments-job',
    businessDate: '2026-11-28',
    exact: true,
    missing: [],
    discovered: 2000,
    completed: 1990,
    rejected: 4,
    deadLettered: 6,
    open: { inFlight: 0, waiting: 0 },
    batches: [
      {
        batchId: 'payments-job:2026-11-28:20261128T010000Z',
        discovered: 2000,
        completed: 1990,
        completedElsewhere: 0,
        adopted: 3,
        rejected: 4,
        deadLettered: 6,
        duplicates: 12,
        retries: 7,
        invalidRows: 0,
        admission: 'complete',
        exact: true,
      },
    ],
    invalidRows: [],
  };

  it('says in one line whether the date is exact, then shows its batches', () => {
    const text = renderAudit(result);

    const [verdict, , batches] = text.split('\n');
    expect(verdict).toBe(
      '2026-11-28 of payments-job: exact, 2,000 operations: 1,990 completed, 4 rejected, 6 dead-lettered, 0 open',
    );
    expect(batches).toBe('Batches');
    expect(text).toMatch(
      /│ payments-job:2026-11-28:20261128T010000Z │ complete +│ 2000 +│ 1990 +│ 0 +│ 3 +│ 4 +│ 6 +│ 12 +│ 7 +│ 0 +│ yes +│/,
    );
    expect(text).not.toContain('Not completed');
    expect(text).not.toContain('Invalid source rows');
  });

  it('lists what is missing under a date that is not exact, and the operations not completed when asked', () => {
    const text = renderAudit({
      ...result,
      exact: false,
      missing: ['2 operations still open (1 in flight, 1 waiting)'],
      completed: 1988,
      open: { inFlight: 1, waiting: 1 },
      operations: [
        {
          operationId: 'reconcile:acme:p-1:2026-11-28',
          state: 'in-flight',
          batchIds: ['payments-job:2026-11-28:20261128T010000Z'],
        },
        {
          operationId: 'reconcile:acme:p-2:2026-11-28',
          state: 'dead-lettered',
          reason: 'provider answered 422',
          batchIds: ['payments-job:2026-11-28:20261128T010000Z'],
        },
      ],
    });

    expect(text.split('\n').slice(0, 2)).toEqual([
      '2026-11-28 of payments-job: NOT exact, 2,000 operations: 1,988 completed, 4 rejected, 6 dead-lettered, 2 open (1 in flight, 1 waiting)',
      '- 2 operations still open (1 in flight, 1 waiting)',
    ]);
    expect(text).toContain('Not completed\n');
    expect(text).toMatch(
      /│ reconcile:acme:p-1:2026-11-28 │ in-flight +│ payments-job:2026-11-28:20261128T010000Z │ - +│/,
    );
    expect(text).toMatch(
      /│ reconcile:acme:p-2:2026-11-28 │ dead-lettered │ payments-job:2026-11-28:20261128T010000Z │ provider answered 422 │/,
    );
  });

  it('says so when every operation is completed and the list was asked for', () => {
    expect(renderAudit({ ...result, operations: [] })).toMatch(/\n\nNot completed: none$/);
  });

  it('counts the invalid source rows in the verdict and lists each with its batch, page, key and reasons', () => {
    const batchId = 'payments-job:2026-11-28:20261128T010000Z';
    const text = renderAudit({
      ...result,
      batches: [{ ...result.batches[0], invalidRows: 2 }],
      invalidRows: [
        { batchId, page: 1, key: 'p 1', reasons: ['payment ID "p 1" cannot be part of an operation ID'] },
        { batchId, page: 3, key: 'p:2', reasons: ['resource.paymentId: too long', 'resource.extra: unrecognized'] },
      ],
    });

    expect(text.split('\n')[0]).toBe(
      '2026-11-28 of payments-job: exact, 2,000 operations: 1,990 completed, 4 rejected, 6 dead-lettered, 0 open; 2 invalid source rows recorded and skipped',
    );
    expect(text).toMatch(/│ 12 +│ 7 +│ 2 +│ yes +│/);
    expect(text).toContain(
      '\n\nInvalid source rows (recorded and skipped: fix them at the source, and the next run discovers them)\n',
    );
    expect(text).toMatch(
      new RegExp(`│ ${batchId} │ 1 +│ p 1 +│ payment ID "p 1" cannot be part of an operation ID +│`),
    );
    expect(text).toMatch(
      new RegExp(`│ ${batchId} │ 3 +│ p:2 +│ resource.paymentId: too long; resource.extra: unrecognized +│`),
    );
  });
});

describe('Function: audit (ops audit)', () => {
  let f: OpsFixture;
  let store: DynamoRunStateStore;
  let ledger: DynamoLedger;
  const job = 'alpha';
  const op = (name: string, date: string) => `reconcile:acme:${name}:${date}`;

  /** A run admitted as the producer admits one: its start, then each page kept and committed in one step, then the step's end. */
  async function admit(
    batchId: string,
    businessDate: string,
    pages: string[][],
    status: AdmissionStatus = 'complete',
    invalid: InvalidRowRecord[][] = [],
  ): Promise<void> {
    const owner = `step-owner-${batchId}`;
    await store.ensure(job, batchId, { businessDate, startedAt: `${businessDate}T01:00:02.000Z` });
    expect(await store.lease(job, batchId, 0, owner, Date.now(), Date.now() + 60_000)).toBe(true);
    for (const [i, operations] of pages.entries()) {
      await store.recordPage(job, batchId, i + 1, owner, operations);
      const rows = invalid[i] ?? [];
      if (rows.length > 0) await store.recordInvalidRows(job, batchId, i + 1, rows);
      const last = i === pages.length - 1 && status === 'complete';
      const page = {
        cursor: last ? undefined : `cursor-${i + 1}`,
        discovered: operations.length,
        published: operations.length,
        invalidRows: rows.length,
      };
      expect(await store.commitPage(job, batchId, 0, owner, page)).toBe(true);
    }
    const nextStepAt = status === 'admitting' ? new Date(Date.now() + 60_000).toISOString() : undefined;
    expect(await store.endStep(job, batchId, 0, owner, { status, nextStepAt })).toBe(true);
  }

  /** An idempotency record as Powertools leaves it: COMPLETED with the consumer's stored result, or claimed (INPROGRESS). */
  async function record(
    operationId: string,
    by: { batchId: string; invocationId: string } | 'in-progress',
  ): Promise<void> {
    const base = { id: idempotencyRecordId(job, operationId), [ATTR.expiryAttr]: Math.floor(Date.now() / 1000) + 3600 };
    const item =
      by === 'in-progress'
        ? { ...base, [ATTR.statusAttr]: 'INPROGRESS', [ATTR.inProgressExpiryAttr]: Date.now() + 60_000 }
        : {
            ...base,
            [ATTR.statusAttr]: 'COMPLETED',
            [ATTR.dataAttr]: { outcome: 'applied', providerStatus: 204, completedBy: by },
          };
    await f.dynamo.send(new PutCommand({ TableName: f.tables.idempotency, Item: item }));
  }

  // 2026-11-01, settled, with a re-run: the scheduled run s and the catch-up m share o4..o6.
  const settled = '2026-11-01';
  const s = `${job}:${settled}:20261101T010000Z`;
  const m = `${job}:${settled}:manual-1`;
  const o = (n: number) => op(`o${n}`, settled);
  // 2026-11-02, not settled: u's p2 is in flight, p3 still queued, p5 completed by an invocation that has not written yet.
  const unsettled = '2026-11-02';
  const u = `${job}:${unsettled}:20261102T010000Z`;
  const p = (n: number) => op(`p${n}`, unsettled);
  const dlqReason = 'provider answered 422: amount mismatch';

  beforeAll(async () => {
    f = await startOpsFixture([job, 'beta']);
    store = new DynamoRunStateStore({ tableName: f.tables.ledger, client: f.dynamo });
    ledger = new DynamoLedger({ tableName: f.tables.ledger, client: f.dynamo });

    await admit(s, settled, [
      [o(1), o(2), o(3)],
      [o(4), o(5), o(6)],
    ]);
    await admit(m, settled, [[o(4), o(5), o(6), o(7), o(8)]]);
    // s-1 completed o1 and o4 and dead-lettered o5, which the re-run then completed.
    await record(o(1), { batchId: s, invocationId: 's-1' });
    await record(o(4), { batchId: s, invocationId: 's-1' });
    await ledger.recordInvocation(job, s, 's-1', {
      consumed: 3,
      completed: 2,
      deadLetteredOperations: [deadLetterEntry(o(5), dlqReason)],
    });
    // s-2 completed o2 and was killed before it wrote its counts; o2's redelivery to s-3 adopts the completion.
    await record(o(2), { batchId: s, invocationId: 's-2' });
    // m-1: o4 was s's already; it completed o5, o6 and o7 and dead-lettered o8.
    await record(o(5), { batchId: m, invocationId: 'm-1' });
    await record(o(6), { batchId: m, invocationId: 'm-1' });
    await record(o(7), { batchId: m, invocationId: 'm-1' });
    await ledger.recordInvocation(job, m, 'm-1', {
      consumed: 5,
      completed: 3,
      elsewhere: [ledgerEntry(s, o(4))],
      deadLetteredOperations: [deadLetterEntry(o(8), dlqReason)],
    });
    // s-3: o2 replayed from s-2 (adopted), o1 replayed from s-1 (a duplicate), o6 was m's, o3 rejected after one retry.
    await ledger.recordRejection({
      job,
      messageId: 'msg-o3',
      reasons: ['resource.amount: expected number'],
      body: '{}',
      operationId: o(3),
      batchId: s,
    });
    await ledger.recordInvocation(job, s, 's-3', {
      consumed: 3,
      retries: 1,
      replays: [ledgerEntry('s-2', o(2)), ledgerEntry('s-1', o(1))],
      elsewhere: [ledgerEntry(m, o(6))],
      rejectedMessages: ['msg-o3'],
    });
    // Another job's rejection of the same operation ID, and one of another date, are not the date's.
    await ledger.recordRejection({
      job: 'beta',
      messageId: 'msg-beta',
      reasons: ['other job'],
      body: '{}',
      operationId: o(8),
      batchId: `beta:${settled}:manual-1`,
    });

    await admit(u, unsettled, [
      [p(1), p(2)],
      [p(3), p(4), p(5)],
    ]);
    await record(p(1), { batchId: u, invocationId: 'u-1' });
    await record(p(2), 'in-progress');
    await record(p(5), { batchId: u, invocationId: 'u-2' });
    await ledger.recordInvocation(job, u, 'u-1', {
      consumed: 2,
      completed: 1,
      deadLetteredOperations: [deadLetterEntry(p(4), dlqReason)],
    });
  });
  afterAll(async () => {
    await f.stop();
  });

  const auditOf = async (date: string, ...flags: string[]) => {
    const out = await f.run(['audit', '--job', job, '--date', date, '--json', ...flags]);
    expect(out.code).toBe(0);
    return out.json<AuditResult>();
  };

  it('finds a settled date exact over its re-run: every operation ended once, in one batch or the other', async () => {
    const result = await auditOf(settled);

    expect(result).toEqual({
      ok: true,
      command: 'audit',
      job,
      businessDate: settled,
      exact: true,
      missing: [],
      discovered: 8,
      completed: 6,
      rejected: 1,
      deadLettered: 1,
      open: { inFlight: 0, waiting: 0 },
      batches: [
        // s's ID sorts first: the ledger returns a date's batches in batch ID order.
        {
          batchId: s,
          discovered: 6,
          completed: 3,
          completedElsewhere: 2,
          adopted: 1,
          rejected: 1,
          deadLettered: 0,
          duplicates: 1,
          retries: 1,
          invalidRows: 0,
          admission: 'complete',
          exact: true,
        },
        {
          batchId: m,
          discovered: 5,
          completed: 3,
          completedElsewhere: 1,
          adopted: 0,
          rejected: 0,
          deadLettered: 1,
          duplicates: 0,
          retries: 0,
          invalidRows: 0,
          admission: 'complete',
          exact: true,
        },
      ],
      invalidRows: [],
    });
  });

  it('lists where each operation that did not complete ended', async () => {
    const result = await auditOf(settled, '--operations');

    expect(result.operations).toEqual([
      { operationId: o(3), state: 'rejected', reason: 'resource.amount: expected number', batchIds: [s] },
      { operationId: o(8), state: 'dead-lettered', reason: dlqReason, batchIds: [m] },
    ]);
  });

  it('finds an unsettled date not exact, and says what is open and which counts disagree', async () => {
    const result = await auditOf(unsettled, '--operations');

    expect(result).toMatchObject({
      exact: false,
      missing: [
        '2 operations still open (1 in flight, 1 waiting)',
        `batch ${u}: discovered 5 != completed 1 + completedElsewhere 0 + rejected 0 + deadLettered 1`,
        `batch ${u}: ledger counts 1 completion, the idempotency records show 2`,
      ],
      discovered: 5,
      completed: 2,
      rejected: 0,
      deadLettered: 1,
      open: { inFlight: 1, waiting: 1 },
      batches: [{ batchId: u, discovered: 5, completed: 1, deadLettered: 1, admission: 'complete', exact: false }],
      operations: [
        { operationId: p(2), state: 'in-flight', batchIds: [u] },
        { operationId: p(3), state: 'waiting', batchIds: [u] },
        { operationId: p(4), state: 'dead-lettered', reason: dlqReason, batchIds: [u] },
      ],
    });
  });

  it('cannot call a date exact whose batches kept no pages, or whose admission has not ended', async () => {
    // A batch from before the ledger kept pages: its counters balance, but the audit cannot see one operation of it.
    const legacy = `${job}:2026-11-03:20261103T010000Z`;
    await ledger.addToBatch(job, legacy, { discovered: 2, published: 2, completed: 2 }, { businessDate: '2026-11-03' });
    const admitting = `${job}:2026-11-04:20261104T010000Z`;
    await admit(admitting, '2026-11-04', [[op('a1', '2026-11-04')]], 'admitting');
    const stopped = `${job}:2026-11-05:20261105T010000Z`;
    await admit(stopped, '2026-11-05', [[op('b1', '2026-11-05')]], 'page-limit');
    for (const [batchId, operationId] of [
      [admitting, op('a1', '2026-11-04')],
      [stopped, op('b1', '2026-11-05')],
    ]) {
      await record(operationId, { batchId, invocationId: 'i-1' });
      await ledger.recordInvocation(job, batchId, 'i-1', { consumed: 1, completed: 1 });
    }

    expect(await auditOf('2026-11-03')).toMatchObject({
      exact: false,
      discovered: 0,
      missing: [
        `batch ${legacy}: its pages in the ledger list 0 operations, its counter says 2 discovered`,
        `batch ${legacy}: ledger counts 2 completions, the idempotency records show 0`,
      ],
      batches: [{ batchId: legacy, exact: true }],
    });
    expect(await auditOf('2026-11-04')).toMatchObject({
      exact: false,
      discovered: 1,
      completed: 1,
      missing: [`batch ${admitting}: still admitting, so the date may have operations not discovered yet`],
    });
    expect(await auditOf('2026-11-05')).toMatchObject({
      exact: false,
      missing: [
        `no batch of the date finished admission (${stopped}: page-limit): operations past the page limit were never discovered; raise maxPagesPerRun and catch the date up`,
      ],
    });
  });

  it('lists the source rows a run recorded and skipped, with key and reasons, and still finds the date exact', async () => {
    const date = '2026-11-08';
    const batchId = `${job}:${date}:20261108T010000Z`;
    const space = {
      key: 'has space',
      reasons: [
        'uploadId: may hold only letters, digits and _ . @ # / + = - (no ":" or spaces), starting with a letter or digit',
      ],
    };
    const millis = { key: 'no-millis', reasons: ['deleteAfter: must be a UTC timestamp with milliseconds'] };
    const colon = { key: 'has:colon', reasons: space.reasons };
    await admit(batchId, date, [[op('g1', date)], [op('g2', date)]], 'complete', [[space, millis], [colon]]);
    for (const name of ['g1', 'g2']) await record(op(name, date), { batchId, invocationId: 'i-1' });
    await ledger.recordInvocation(job, batchId, 'i-1', { consumed: 2, completed: 2 });

    const result = await auditOf(date);
    const text = await f.run(['audit', '--job', job, '--date', date]);

    expect(result).toMatchObject({
      exact: true,
      missing: [],
      discovered: 2,
      completed: 2,
      batches: [{ batchId, discovered: 2, completed: 2, invalidRows: 3, exact: true }],
    });
    expect(result.invalidRows).toEqual([
      { batchId, page: 1, ...space, rejectedAt: expect.any(String) },
      { batchId, page: 1, ...millis, rejectedAt: expect.any(String) },
      { batchId, page: 2, ...colon, rejectedAt: expect.any(String) },
    ]);
    expect(text.stdout.split('\n')[0]).toBe(
      `${date} of alpha: exact, 2 operations: 2 completed, 0 rejected, 0 dead-lettered, 0 open; 3 invalid source rows recorded and skipped`,
    );
    expect(text.stdout).toMatch(
      new RegExp(`│ ${batchId} │ 1 +│ has space +│ ${space.reasons[0].replace(/[.+()]/g, '\\$&')} +│`),
    );
    expect(text.stdout).toMatch(new RegExp(`│ ${batchId} │ 2 +│ has:colon +│`));
  });

  it('prints the verdict, the batches and the operations not completed as text', async () => {
    const exact = await f.run(['audit', '--job', job, '--date', settled]);
    const open = await f.run(['audit', '--job', job, '--date', unsettled, '--operations']);

    expect(exact.code).toBe(0);
    expect(exact.stdout).toMatch(
      new RegExp(
        `^${settled} of alpha: exact, 8 operations: 6 completed, 1 rejected, 1 dead-lettered, 0 open\n\nBatches\n`,
      ),
    );
    expect(exact.stdout).toContain(`│ ${s} │ complete`);
    expect(exact.stdout).not.toContain('Not completed');
    expect(open.stdout).toMatch(
      new RegExp(
        `^${unsettled} of alpha: NOT exact, 5 operations: 2 completed, 0 rejected, 1 dead-lettered, 2 open \\(1 in flight, 1 waiting\\)\n- 2 operations still open`,
      ),
    );
    expect(open.stdout).toContain('Not completed\n');
    expect(open.stdout).toMatch(new RegExp(`│ ${p(3)} │ waiting +│ ${u} │ - +│`));
  });

  it('reads the records 100 keys a request, and asks again, after a wait, for the keys DynamoDB left unprocessed', async () => {
    const date = '2026-11-07';
    const batchId = `${job}:${date}:20261107T010000Z`;
    const operations = Array.from({ length: 250 }, (_, i) => op(`q${String(i).padStart(3, '0')}`, date));
    await admit(batchId, date, [operations.slice(0, 120), operations.slice(120)]);
    await Promise.all(operations.map((operationId) => record(operationId, { batchId, invocationId: 'q-1' })));
    await ledger.recordInvocation(job, batchId, 'q-1', { consumed: 250, completed: 250 });
    // DynamoDB answers the first request in part, as it does when throttled.
    const requested: number[] = [];
    const sleeps: number[] = [];
    const clients = (settings: Parameters<typeof createClients>[0]) => {
      const real = createClients(settings);
      const send = real.dynamo.send.bind(real.dynamo) as (command: unknown) => Promise<unknown>;
      const dynamo = {
        send: async (command: unknown) => {
          const response = await send(command);
          if (!(command instanceof BatchGetCommand)) return response;
          const keys = command.input.RequestItems![f.tables.idempotency].Keys!;
          requested.push(keys.length);
          if (requested.length > 1) return response;
          const out = response as BatchGetCommandOutput;
          const kept = out.Responses![f.tables.idempotency].slice(0, 60);
          const answered = new Set(kept.map((item) => item.id));
          return {
            ...out,
            Responses: { [f.tables.idempotency]: kept },
            UnprocessedKeys: { [f.tables.idempotency]: { Keys: keys.filter((k) => !answered.has(k.id)) } },
          };
        },
      };
      return { ...real, dynamo } as ReturnType<typeof createClients>;
    };
    let stdout = '';
    const io: OpsIo = {
      stdout: (t) => (stdout += t),
      stderr: () => undefined,
      interactive: false,
      ask: async () => '',
      now: () => new Date(),
      sleep: async (ms) => {
        sleeps.push(ms);
      },
    };

    const code = await runOps(
      ['audit', '--job', job, '--date', date, '--json', '--local', '--endpoints', f.endpointsFile],
      { io, clients },
    );

    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ exact: true, missing: [], discovered: 250, completed: 250 });
    // The 40 keys left unprocessed are asked again after the others.
    expect(requested).toEqual([100, 100, 50, 40]);
    expect(sleeps).toEqual([50]);
  });

  it('exits 1 naming the job, the date and how to list the batches when the date has no batch', async () => {
    const out = await f.run(['audit', '--job', job, '--date', '2026-11-06', '--json']);

    const message = `no batch of alpha for business date 2026-11-06 in the run ledger (${f.tables.ledger}); list the job's batches with \`ops status --job alpha --batches 50\``;
    expect(out.code).toBe(1);
    expect(out.stderr).toBe(`error: ${message}\n`);
    expect(out.json()).toEqual({
      ok: false,
      error: { name: 'NoBatchForDateError', message, job: 'alpha', businessDate: '2026-11-06', exitCode: 1 },
    });
  });

  it('refuses a date that is not a real YYYY-MM-DD, an unknown job, and a missing --job (exit 2)', async () => {
    const badDate = await f.run(['audit', '--job', job, '--date', '2026-02-30', '--json']);
    const unknownJob = await f.run(['audit', '--job', 'gamma', '--date', settled, '--json']);
    const noJob = await f.run(['audit', '--date', settled]);

    expect(badDate.code).toBe(2);
    expect(badDate.json()).toMatchObject({
      ok: false,
      error: { name: 'UsageError', message: '--date "2026-02-30" is not a real date in the form YYYY-MM-DD' },
    });
    expect(unknownJob.code).toBe(2);
    expect(unknownJob.json()).toMatchObject({
      ok: false,
      error: { name: 'UsageError', message: 'unknown job "gamma"; PacedJobs-test has: alpha, beta' },
    });
    expect(noJob.code).toBe(2);
    expect(noJob.stderr).toContain("required option '--job <job>' not specified");
  });
});
