// The chaos run's faults: each decided from the seed, counted as injected, none once the faults are off.
import { ChaosFaults, faultCounters, planStormWindows, S3_FAULTED_ATTEMPTS, type FaultRates } from '../../chaos/faults';
import { Prng } from '../../chaos/prng';

const NONE: FaultRates = {
  duplicateRate: 0,
  killRate: 0,
  downstreamErrorRate: 0,
  rejectRate: 0,
  slowRate: 0,
  hangAfterEffectRate: 0,
  dropBeforeEffectRate: 0,
  stormShare: 0,
  dynamoFaultRate: 0,
  dynamoStallRate: 0,
  s3FaultRate: 0,
  consumerTimeoutSeconds: 20,
};
const STARTED = 1_000_000;
const request = (key: string, at = STARTED) =>
  ({ at, idempotencyKey: key }) as Parameters<ChaosFaults['downstream']>[0];

describe('Function: faultCounters', () => {
  it("lists the downstream's counters only for a job with one, and S3's only for a job with buckets", () => {
    expect(Object.keys(faultCounters({ downstream: false, buckets: false }))).not.toEqual(
      expect.arrayContaining(['downstreamErrors']),
    );
    expect(faultCounters({ downstream: true, buckets: false })).toMatchObject({
      downstreamErrors: 0,
      downstreamStormThrottles: 0,
    });
    expect(faultCounters({ downstream: false, buckets: true })).toMatchObject({ s3SlowDowns: 0, s3Errors: 0 });
    expect(Object.keys(faultCounters({ downstream: false, buckets: false }))).not.toContain('s3Errors');
  });
});

describe('Function: planStormWindows', () => {
  it('plans the same storms for the same seed, longer with a larger share, within the hour', () => {
    const a = planStormWindows(new Prng(7).fork('plan'), 0.1);
    const b = planStormWindows(new Prng(7).fork('plan'), 0.1);
    const wider = planStormWindows(new Prng(7).fork('plan'), 0.2);

    expect(a).toEqual(b);
    expect(a.every(([from, to]) => from < to && from < 3_600_000)).toBe(true);
    expect(wider.map(([from]) => from)).toEqual(a.map(([from]) => from));
    expect(wider[0][1] - wider[0][0]).toBe(2 * (a[0][1] - a[0][0]));
  });
});

describe('Class: ChaosFaults', () => {
  it('injects nothing at zero rates, and counts nothing', () => {
    const faults = new ChaosFaults(1, NONE, STARTED);
    faults.counts = faultCounters({ downstream: true, buckets: true });

    expect(faults.downstream(request('op-1'))).toBeUndefined();
    expect(faults.dynamo('PutItem')).toBeUndefined();
    expect(faults.s3({ bucket: 'b', key: 'k' })).toBeUndefined();
    expect(faults.consumerKillAfterMs()).toBeUndefined();
    expect(faults.duplicates('op-1')).toEqual([]);
    expect(Object.values(faults.counts).every((n) => n === 0)).toBe(true);
  });

  it('throttles every downstream request inside a storm, and counts each', () => {
    const faults = new ChaosFaults(1, { ...NONE, stormShare: 0.1 }, STARTED);
    faults.counts = faultCounters({ downstream: true, buckets: false });
    const [from] = faults.storms[0];

    expect(faults.downstream(request('op-1', STARTED + from))).toEqual({ kind: 'throttle', retryAfterSeconds: 1 });
    expect(faults.downstream(request('op-1', STARTED + from - 1))).toBeUndefined();
    expect(faults.counts.downstreamStormThrottles).toBe(1);
  });

  it("fails a faulted S3 object's first calls whole, then lets it through", () => {
    const faults = new ChaosFaults(1, { ...NONE, s3FaultRate: 1 }, STARTED);
    faults.counts = faultCounters({ downstream: false, buckets: true });
    const calls = Array.from({ length: S3_FAULTED_ATTEMPTS + 1 }, () => faults.s3({ bucket: 'b', key: 'k' }));

    expect(calls.slice(0, S3_FAULTED_ATTEMPTS).every((f) => f === 'SlowDown' || f === 'InternalError')).toBe(true);
    expect(calls[S3_FAULTED_ATTEMPTS]).toBeUndefined();
    expect(faults.counts.s3SlowDowns + faults.counts.s3Errors).toBe(S3_FAULTED_ATTEMPTS);
  });

  it('decides one operation once: its copies when it is first seen, none for its re-publishes', () => {
    const faults = new ChaosFaults(1, { ...NONE, duplicateRate: 1 }, STARTED);
    const delays = faults.duplicates('op-1');

    expect(delays.length).toBeGreaterThanOrEqual(1);
    expect(delays.length).toBeLessThanOrEqual(3);
    expect(delays.every((d) => d >= 0 && d <= 3)).toBe(true);
    expect(faults.duplicates('op-1')).toEqual([]);
    expect(faults.counts).toMatchObject({ duplicatedMessages: 1, duplicateCopies: delays.length });
  });

  it('injects nothing once off, whatever the rates', () => {
    const all = { ...NONE, duplicateRate: 1, killRate: 1, dynamoFaultRate: 1, dynamoStallRate: 1, s3FaultRate: 1 };
    const faults = new ChaosFaults(1, all, STARTED);
    faults.on = false;

    expect([faults.dynamo('PutItem'), faults.s3({ bucket: 'b', key: 'k' }), faults.consumerKillAfterMs()]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    expect(faults.duplicates('op-1')).toEqual([]);
  });

  it('stalls only the consumer claims and pre-checks, and gives the same faults for the same seed', () => {
    const stalls = new ChaosFaults(3, { ...NONE, dynamoStallRate: 1 }, STARTED);
    expect([stalls.dynamo('PutItem'), stalls.dynamo('BatchGetItem'), stalls.dynamo('UpdateItem')]).toEqual([
      'Stall',
      'Stall',
      undefined,
    ]);

    const draws = (seed: number) => {
      const faults = new ChaosFaults(seed, { ...NONE, dynamoFaultRate: 0.5, killRate: 0.5 }, STARTED);
      return Array.from({ length: 20 }, () => [faults.dynamo('Query'), faults.consumerKillAfterMs()]);
    };
    expect(draws(9)).toEqual(draws(9));
  });
});
