import { businessDates, type CatchUpResult, MAX_CATCH_UP_DATES } from '../../../ops/commands/catchUp';
import { UsageError } from '../../../ops/errors';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { type OpsFixture, startOpsFixture, TARGET } from '../fixture';

describe('Function: businessDates', () => {
  it('lists every date of the range in order, across a month end and a DST change', () => {
    expect(businessDates('2026-10-24', '2026-11-02')).toEqual([
      '2026-10-24',
      '2026-10-25',
      '2026-10-26',
      '2026-10-27',
      '2026-10-28',
      '2026-10-29',
      '2026-10-30',
      '2026-10-31',
      '2026-11-01',
      '2026-11-02',
    ]);
  });

  it('accepts a range of one date', () => {
    expect(businessDates('2024-02-29', '2024-02-29')).toEqual(['2024-02-29']);
  });

  it('throws when a date is not real', () => {
    expect(() => businessDates('2026-02-30', '2026-03-01')).toThrow(
      new UsageError('--from "2026-02-30" is not a real date in the form YYYY-MM-DD'),
    );
    expect(() => businessDates('2026-03-01', '3/2/2026')).toThrow(
      new UsageError('--to "3/2/2026" is not a real date in the form YYYY-MM-DD'),
    );
  });

  it('throws when the range is reversed', () => {
    expect(() => businessDates('2026-11-03', '2026-11-01')).toThrow(
      new UsageError('--from 2026-11-03 is after --to 2026-11-01; give the earlier date first'),
    );
  });

  it(`throws when the range holds more than ${MAX_CATCH_UP_DATES} dates`, () => {
    expect(businessDates('2026-01-01', '2026-01-31')).toHaveLength(31);
    expect(() => businessDates('2026-01-01', '2026-02-01')).toThrow(
      new UsageError('2026-01-01..2026-02-01 is 32 dates; one catch-up covers at most 31, so run it in parts'),
    );
  });
});

describe('Function: catchUp (ops catch-up)', () => {
  let f: OpsFixture;

  beforeAll(async () => {
    f = await startOpsFixture(['alpha']);
  });
  afterAll(async () => {
    await f.stop();
  });
  beforeEach(() => {
    f.producerCalls.length = 0;
    f.failProducerWith = undefined;
  });

  it('plans one run per date and invokes nothing with --dry-run', async () => {
    const out = await f.run([
      'catch-up',
      '--job',
      'alpha',
      '--from',
      '2026-11-01',
      '--to',
      '2026-11-03',
      '--dry-run',
      '--json',
    ]);

    expect(out.code).toBe(0);
    const result = out.json<CatchUpResult>();
    expect(result).toMatchObject({
      ok: true,
      command: 'catch-up',
      dryRun: true,
      job: 'alpha',
      invocation: 'synchronous',
    });
    expect(result.runs.map((r) => [r.businessDate, r.status])).toEqual([
      ['2026-11-01', 'planned'],
      ['2026-11-02', 'planned'],
      ['2026-11-03', 'planned'],
    ]);
    expect(f.producerCalls).toEqual([]);
  });

  it('invokes the producer once per date, in order, each with a new batch ID', async () => {
    const out = await f.run([
      'catch-up',
      '--job',
      'alpha',
      '--from',
      '2026-11-01',
      '--to',
      '2026-11-03',
      '--yes',
      '--json',
    ]);

    expect(out.code).toBe(0);
    expect(f.producerCalls.map((c) => [c.functionName, c.event.businessDate])).toEqual([
      ['alpha-producer', '2026-11-01'],
      ['alpha-producer', '2026-11-02'],
      ['alpha-producer', '2026-11-03'],
    ]);
    const batchIds = f.producerCalls.map((c) => c.event.batchId as string);
    expect(new Set(batchIds).size).toBe(3);
    batchIds.forEach((id, i) => expect(id).toMatch(new RegExp(`^alpha:2026-11-0${i + 1}:manual-[0-9a-f]{8}$`)));
    const result = out.json<CatchUpResult>();
    expect(result.runs.map((r) => [r.batchId, r.status])).toEqual(batchIds.map((id) => [id, 'published']));
    expect(result.runs[0].summary).toEqual({
      batchId: batchIds[0],
      businessDate: '2026-11-01',
      pages: 1,
      discovered: 2,
      published: 2,
      continued: false,
      stoppedAtPageLimit: false,
    });
  });

  it('gives a repeated catch-up of the same dates new batch IDs', async () => {
    await f.run(['catch-up', '--job', 'alpha', '--from', '2026-11-01', '--to', '2026-11-01', '--yes']);
    await f.run(['catch-up', '--job', 'alpha', '--from', '2026-11-01', '--to', '2026-11-01', '--yes']);

    expect(f.producerCalls[0].event.batchId).not.toBe(f.producerCalls[1].event.batchId);
  });

  it('stops at the first failed date and says which dates were published', async () => {
    f.failProducerWith = 'invalid producer event: cursor: too long';

    const out = await f.run([
      'catch-up',
      '--job',
      'alpha',
      '--from',
      '2026-11-01',
      '--to',
      '2026-11-03',
      '--yes',
      '--json',
    ]);

    expect(out.code).toBe(1);
    expect(f.producerCalls).toHaveLength(1);
    const batchId = f.producerCalls[0].event.batchId as string;
    const message = `the alpha producer failed for 2026-11-01 (batch ${batchId}): ProducerEventError: invalid producer event: cursor: too long; later dates were not started`;
    expect(out.stderr).toBe(
      `run the alpha producer for 3 business date(s), 2026-11-01 to 2026-11-03 on ${TARGET} (confirmed by --yes)\nerror: ${message}\n`,
    );
    expect(out.json()).toEqual({
      ok: false,
      error: {
        name: 'ProducerInvocationError',
        message,
        exitCode: 1,
        job: 'alpha',
        businessDate: '2026-11-01',
        batchId,
        completed: [],
      },
    });
  });

  it('refuses a reversed range before invoking anything', async () => {
    const out = await f.run(['catch-up', '--job', 'alpha', '--from', '2026-11-03', '--to', '2026-11-01', '--yes']);

    expect(out.code).toBe(2);
    expect(out.stderr).toBe('error: --from 2026-11-03 is after --to 2026-11-01; give the earlier date first\n');
    expect(f.producerCalls).toEqual([]);
  });

  it("refuses a date after the job's latest business date before invoking anything, naming both dates", async () => {
    // 23:30 UTC on 4 December is already 5 December in Berlin: with the offset of -1 the latest date is the 4th.
    const now = new Date('2026-12-04T23:30:00Z');
    const message =
      'business date 2026-12-05 is in the future: the latest for alpha now is 2026-12-04 (Europe/Berlin, offset -1)';

    const out = await f.run(
      ['catch-up', '--job', 'alpha', '--from', '2026-12-03', '--to', '2026-12-05', '--yes', '--json'],
      { now },
    );
    const dry = await f.run(['catch-up', '--job', 'alpha', '--from', '2026-12-05', '--to', '2026-12-05', '--dry-run'], {
      now,
    });

    expect(out.code).toBe(2);
    expect(out.json()).toEqual({ ok: false, error: { name: 'UsageError', message, exitCode: 2 } });
    expect(dry.code).toBe(2);
    expect(dry.stderr).toBe(`error: ${message}\n`);
    expect(f.producerCalls).toEqual([]);
  });

  it("runs the job's latest business date", async () => {
    const out = await f.run(
      ['catch-up', '--job', 'alpha', '--from', '2026-12-04', '--to', '2026-12-04', '--yes', '--json'],
      { now: new Date('2026-12-04T23:30:00Z') },
    );

    expect(out.code).toBe(0);
    expect(f.producerCalls.map((c) => c.event.businessDate)).toEqual(['2026-12-04']);
  });

  it('refuses without --yes when stdin is not a TTY', async () => {
    const out = await f.run(['catch-up', '--job', 'alpha', '--from', '2026-11-01', '--to', '2026-11-02']);

    expect(out.code).toBe(1);
    expect(out.stderr).toBe(
      `error: refusing to run the alpha producer for 2 business date(s), 2026-11-01 to 2026-11-02 on ${TARGET} without confirmation: stdin is not a TTY; pass --yes to confirm, or --dry-run to preview\n`,
    );
    expect(f.producerCalls).toEqual([]);
  });

  it('requires --job, --from and --to', async () => {
    const out = await f.run(['catch-up', '--from', '2026-11-01', '--to', '2026-11-02', '--json']);

    expect(out.code).toBe(2);
    expect(out.stderr).toContain("error: required option '--job <job>' not specified");
    expect(out.json()).toEqual({
      ok: false,
      error: {
        name: 'UsageError',
        code: 'commander.missingMandatoryOptionValue',
        message: "error: required option '--job <job>' not specified",
      },
    });
  });
});

describe('Function: catchUpMissed (ops catch-up --missed)', () => {
  let f: OpsFixture;
  // The fixture's schedule: cron(0 2 * * ? *) in Europe/Berlin, its producer covering the day before (offset -1).
  const batch = (date: string, suffix: string) =>
    new DynamoLedger({ tableName: f.tables.ledger, client: f.dynamo }).addToBatch(
      'alpha',
      `alpha:${date}:${suffix}`,
      { discovered: 1 },
      { businessDate: date },
    );

  beforeAll(async () => {
    f = await startOpsFixture(['alpha']);
    // Runs before and after a paused week, around the night Berlin's clocks go back (2026-10-25, 03:00 -> 02:00).
    await batch('2026-10-19', '20261020T000000Z');
    await batch('2026-10-27', '20261028T010000Z');
  });
  afterAll(async () => {
    await f.stop();
  });
  beforeEach(() => {
    f.producerCalls.length = 0;
  });

  it('works out the dates the schedule should have produced since --since, across the DST change, and lists those with no batch', async () => {
    const out = await f.run(
      ['catch-up', '--job', 'alpha', '--missed', '--since', '2026-10-19', '--dry-run', '--json'],
      { now: new Date('2026-10-28T12:00:00Z') },
    );
    expect(out.code).toBe(0);
    const result = out.json<CatchUpResult>();
    // Fires at 02:00 Berlin on 10-20 ... 10-28 cover 10-19 ... 10-27; the repeated 02:00 of 10-25 is one run.
    expect(result.missed).toEqual({
      since: '2026-10-19',
      sinceSource: 'option',
      schedule: { expression: 'cron(0 2 * * ? *)', timeZone: 'Europe/Berlin', businessDateOffsetDays: -1 },
      expected: [
        '2026-10-19',
        '2026-10-20',
        '2026-10-21',
        '2026-10-22',
        '2026-10-23',
        '2026-10-24',
        '2026-10-25',
        '2026-10-26',
        '2026-10-27',
      ],
      missing: ['2026-10-20', '2026-10-21', '2026-10-22', '2026-10-23', '2026-10-24', '2026-10-25', '2026-10-26'],
      skippedByDst: [],
    });
    expect(result.runs.map((r) => [r.businessDate, r.status])).toEqual(
      result.missed!.missing.map((d) => [d, 'planned']),
    );
    expect(f.producerCalls).toEqual([]);
  });

  it('runs the missed dates in order, each with a new batch ID, and then finds none', async () => {
    const now = new Date('2026-10-28T12:00:00Z');
    const out = await f.run(['catch-up', '--job', 'alpha', '--missed', '--since', '2026-10-19', '--yes', '--json'], {
      now,
    });
    expect(out.code).toBe(0);
    expect(f.producerCalls.map((c) => c.event.businessDate)).toEqual([
      '2026-10-20',
      '2026-10-21',
      '2026-10-22',
      '2026-10-23',
      '2026-10-24',
      '2026-10-25',
      '2026-10-26',
    ]);
    const batchIds = f.producerCalls.map((c) => c.event.batchId as string);
    expect(new Set(batchIds).size).toBe(7);
    batchIds.forEach((id, i) => expect(id).toMatch(new RegExp(`^alpha:2026-10-${20 + i}:manual-[0-9a-f]{8}$`)));

    // The stub producer writes no ledger: record the runs as a real one would, and ask again.
    for (const c of f.producerCalls) await batch(c.event.businessDate as string, String(c.event.batchId).split(':')[2]);
    f.producerCalls.length = 0;
    const again = await f.run(['catch-up', '--job', 'alpha', '--missed', '--since', '2026-10-19', '--yes'], { now });
    expect(again.code).toBe(0);
    expect(f.producerCalls).toEqual([]);
    expect(again.stdout).toContain(
      'catch-up alpha: no missed business dates since 2026-10-19 (9 expected from cron(0 2 * * ? *) in Europe/Berlin, each has a batch)',
    );
  });

  it("looks back a week by default, and no further than the job's oldest batch", async () => {
    const out = await f.run(['catch-up', '--job', 'alpha', '--missed', '--dry-run', '--json'], {
      now: new Date('2026-11-01T12:00:00Z'),
    });
    const missed = out.json<CatchUpResult>().missed!;
    expect([missed.since, missed.sinceSource]).toEqual(['2026-10-25', 'default']);
    // 10-25 .. 10-27 have batches now; 10-28 .. 10-31 were never run.
    expect(missed.missing).toEqual(['2026-10-28', '2026-10-29', '2026-10-30', '2026-10-31']);
    const early = await f.run(['catch-up', '--job', 'alpha', '--missed', '--dry-run', '--json'], {
      now: new Date('2026-10-21T12:00:00Z'),
    });
    expect(early.json<CatchUpResult>().missed).toMatchObject({ since: '2026-10-19', sinceSource: 'oldest-batch' });
  });

  it('refuses --since without --missed, --missed with --from, and a bad --since', async () => {
    expect((await f.run(['catch-up', '--job', 'alpha', '--since', '2026-10-19'])).stderr).toContain(
      '--since goes with --missed',
    );
    expect((await f.run(['catch-up', '--job', 'alpha', '--missed', '--from', '2026-10-19'])).code).toBe(2);
    expect((await f.run(['catch-up', '--job', 'alpha', '--missed', '--since', '2026-13-01'])).stderr).toContain(
      '--since "2026-13-01" is not a real date',
    );
    expect((await f.run(['catch-up', '--job', 'alpha'])).stderr).toContain(
      'say which dates: --from <date> --to <date>, or --missed',
    );
  });
});
