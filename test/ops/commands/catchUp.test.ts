import { businessDates, type CatchUpResult, MAX_CATCH_UP_DATES } from '../../../ops/commands/catchUp';
import { UsageError } from '../../../ops/errors';
import { OpsFixture, startOpsFixture } from '../fixture';

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
    expect(() => businessDates('2026-02-30', '2026-03-01')).toThrow(new UsageError('--from "2026-02-30" is not a real date in the form YYYY-MM-DD'));
    expect(() => businessDates('2026-03-01', '3/2/2026')).toThrow(new UsageError('--to "3/2/2026" is not a real date in the form YYYY-MM-DD'));
  });

  it('throws when the range is reversed', () => {
    expect(() => businessDates('2026-11-03', '2026-11-01')).toThrow(new UsageError('--from 2026-11-03 is after --to 2026-11-01; give the earlier date first'));
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
    const out = await f.run(['catch-up', '--job', 'alpha', '--from', '2026-11-01', '--to', '2026-11-03', '--dry-run', '--json']);

    expect(out.code).toBe(0);
    const result = out.json<CatchUpResult>();
    expect(result).toMatchObject({ ok: true, command: 'catch-up', dryRun: true, job: 'alpha', invocation: 'synchronous' });
    expect(result.runs.map((r) => [r.businessDate, r.status])).toEqual([
      ['2026-11-01', 'planned'],
      ['2026-11-02', 'planned'],
      ['2026-11-03', 'planned'],
    ]);
    expect(f.producerCalls).toEqual([]);
  });

  it('invokes the producer once per date, in order, each with a new batch ID', async () => {
    const out = await f.run(['catch-up', '--job', 'alpha', '--from', '2026-11-01', '--to', '2026-11-03', '--yes', '--json']);

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
    expect(result.runs[0].summary).toEqual({ batchId: batchIds[0], businessDate: '2026-11-01', pages: 1, discovered: 2, published: 2, continued: false, stoppedAtPageLimit: false });
  });

  it('gives a repeated catch-up of the same dates new batch IDs', async () => {
    await f.run(['catch-up', '--job', 'alpha', '--from', '2026-11-01', '--to', '2026-11-01', '--yes']);
    await f.run(['catch-up', '--job', 'alpha', '--from', '2026-11-01', '--to', '2026-11-01', '--yes']);

    expect(f.producerCalls[0].event.batchId).not.toBe(f.producerCalls[1].event.batchId);
  });

  it('stops at the first failed date and says which dates were published', async () => {
    f.failProducerWith = 'invalid producer event: cursor: too long';

    const out = await f.run(['catch-up', '--job', 'alpha', '--from', '2026-11-01', '--to', '2026-11-03', '--yes', '--json']);

    expect(out.code).toBe(1);
    expect(f.producerCalls).toHaveLength(1);
    const batchId = f.producerCalls[0].event.batchId as string;
    const message = `the alpha producer failed for 2026-11-01 (batch ${batchId}): ProducerEventError: invalid producer event: cursor: too long; later dates were not started`;
    expect(out.stderr).toBe(`error: ${message}\n`);
    expect(out.json()).toEqual({
      ok: false,
      error: { name: 'ProducerInvocationError', message, exitCode: 1, job: 'alpha', businessDate: '2026-11-01', batchId, completed: [] },
    });
  });

  it('refuses a reversed range before invoking anything', async () => {
    const out = await f.run(['catch-up', '--job', 'alpha', '--from', '2026-11-03', '--to', '2026-11-01', '--yes']);

    expect(out.code).toBe(2);
    expect(out.stderr).toBe('error: --from 2026-11-03 is after --to 2026-11-01; give the earlier date first\n');
    expect(f.producerCalls).toEqual([]);
  });

  it('refuses without --yes when stdin is not a TTY', async () => {
    const out = await f.run(['catch-up', '--job', 'alpha', '--from', '2026-11-01', '--to', '2026-11-02']);

    expect(out.code).toBe(1);
    expect(out.stderr).toBe(
      'error: refusing to run the alpha producer for 2 business date(s), 2026-11-01 to 2026-11-02 without confirmation: stdin is not a TTY; pass --yes to confirm, or --dry-run to preview\n',
    );
    expect(f.producerCalls).toEqual([]);
  });

  it('requires --job, --from and --to', async () => {
    const out = await f.run(['catch-up', '--from', '2026-11-01', '--to', '2026-11-02', '--json']);

    expect(out.code).toBe(2);
    expect(out.stderr).toContain("error: required option '--job <job>' not specified");
    expect(out.json()).toEqual({ ok: false, error: { name: 'UsageError', code: 'commander.missingMandatoryOptionValue', message: "error: required option '--job <job>' not specified" } });
  });
});
