// The local alarm evaluator on hand-built alarms and samples: the template read as synthesized, the metric math subset
// with CloudWatch's missing-data semantics (the user guide's own examples), FILL, and the alarm's state per period
// (the guide's two tables of missing-data cases, and the consecutive-periods rule).
import {
  AlarmEvaluationError,
  AlarmState,
  evaluateAlarm,
  evaluateQueries,
  parseMetricMath,
  planResolveContext,
  readAlarm,
  scaleAlarm,
  stateOf,
  type TreatMissingData,
  UnsupportedMetricMathError,
  type AlarmDefinition,
} from '../../local/alarms';
import type { MetricSample } from '../../local/metricsTap';
import { emptyPlan, type StackPlan } from '../../local/plan';
import type { CloudFormationTemplate } from '../../local/template';

const STALLED =
  'IF((FILL(visible, 0) + FILL(delayed, 0)) > 0 AND (FILL(applied, 0) + FILL(done, 0) + FILL(dead, 0) + FILL(rejected, 0)) == 0, 1, 0)';
const JOB = 'a-job';
const QUEUE_NAME = 'Stack-AJobQueue1234';
const PERIOD_MS = 60_000;
/** A period boundary (multiples of the period since the epoch, as CloudWatch aligns them). */
const T0 = 1_800_000_000_000 - (1_800_000_000_000 % PERIOD_MS);

const queueMetric = (id: string, metricName: string) => ({
  Id: id,
  MetricStat: {
    Metric: {
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': ['AJobQueue', 'QueueName'] } }],
      MetricName: metricName,
      Namespace: 'AWS/SQS',
    },
    Period: 60,
    Stat: 'Maximum',
  },
  ReturnData: false,
});
const jobMetric = (id: string, metricName: string) => ({
  Id: id,
  MetricStat: {
    Metric: {
      Dimensions: [
        { Name: 'job', Value: JOB },
        { Name: 'service', Value: JOB },
      ],
      MetricName: metricName,
      Namespace: 'PacedJobs',
    },
    Period: 60,
    Stat: 'Sum',
  },
  ReturnData: false,
});

/** The stalled alarm as the stack synthesizes it (lib/monitoring.ts), with an SNS action the evaluator never resolves. */
function template(overrides: Record<string, unknown> = {}): CloudFormationTemplate {
  return {
    Resources: {
      AJobQueue: { Type: 'AWS::SQS::Queue', Properties: {} },
      AJobStalled: {
        Type: 'AWS::CloudWatch::Alarm',
        Properties: {
          AlarmActions: [{ Ref: 'AlarmTopic' }],
          AlarmName: 'Stack-a-job-stalled',
          ComparisonOperator: 'GreaterThanThreshold',
          DatapointsToAlarm: 15,
          EvaluationPeriods: 15,
          Metrics: [
            { Expression: STALLED, Id: 'expr_1', Label: 'Waiting work, nothing settled', ReturnData: true },
            queueMetric('visible', 'ApproximateNumberOfMessagesVisible'),
            queueMetric('delayed', 'ApproximateNumberOfMessagesDelayed'),
            jobMetric('applied', 'Applied'),
            jobMetric('done', 'AlreadyDone'),
            jobMetric('dead', 'DeadLettered'),
            jobMetric('rejected', 'Rejected'),
          ],
          Threshold: 0,
          TreatMissingData: 'notBreaching',
          ...overrides,
        },
      },
    },
  };
}

function plan(): StackPlan {
  const p = emptyPlan({ stackName: 'Stack', region: 'us-east-1', accountId: '000000000000' });
  p.queues.push({
    logicalId: 'AJobQueue',
    name: QUEUE_NAME,
    url: `http://127.0.0.1:1/000000000000/${QUEUE_NAME}`,
    arn: `arn:aws:sqs:us-east-1:000000000000:${QUEUE_NAME}`,
    attributes: {},
  });
  return p;
}

const stalled = () => readAlarm(template(), 'Stack-a-job-stalled', planResolveContext(plan()));

const sample = (metricName: string, minute: number, value: number, seconds = 30): MetricSample => {
  const sqs = metricName.startsWith('Approximate');
  return {
    namespace: sqs ? 'AWS/SQS' : 'PacedJobs',
    metricName,
    dimensions: sqs ? { QueueName: QUEUE_NAME } : { service: JOB, job: JOB },
    timestamp: T0 + minute * PERIOD_MS + seconds * 1000,
    value,
  };
};

/** A one-metric alarm (id m) over hand-made values per minute (undefined: no sample that minute). */
function simpleAlarm(expression: string, extra: Partial<AlarmDefinition> = {}): AlarmDefinition {
  return {
    logicalId: 'Test',
    alarmName: 'test',
    threshold: 0,
    comparisonOperator: 'GreaterThanThreshold',
    evaluationPeriods: 3,
    datapointsToAlarm: 3,
    treatMissingData: 'notBreaching',
    periodSeconds: 60,
    returnId: 'e',
    metrics: ['m1', 'm2', 'm3'].map((id) => ({
      id,
      namespace: 'Test',
      metricName: id,
      dimensions: {},
      stat: 'Sum' as const,
      periodSeconds: 60,
    })),
    expressions: [{ id: 'e', expression }],
    ...extra,
  };
}
const seriesSamples = (values: Record<string, (number | undefined)[]>): MetricSample[] =>
  Object.entries(values).flatMap(([metricName, points]) =>
    points.flatMap((v, minute) =>
      v === undefined
        ? []
        : [{ namespace: 'Test', metricName, dimensions: {}, timestamp: T0 + minute * PERIOD_MS + 1000, value: v }],
    ),
  );
const evaluate = (expression: string, values: Record<string, (number | undefined)[]>, length: number) =>
  evaluateQueries(simpleAlarm(expression), seriesSamples(values), T0, length).e;

describe('Function: readAlarm', () => {
  it('reads the synthesized stalled alarm: its expression, metric queries with resolved dimensions, and its rules', () => {
    expect(stalled()).toEqual({
      logicalId: 'AJobStalled',
      alarmName: 'Stack-a-job-stalled',
      threshold: 0,
      comparisonOperator: 'GreaterThanThreshold',
      evaluationPeriods: 15,
      datapointsToAlarm: 15,
      treatMissingData: 'notBreaching',
      periodSeconds: 60,
      returnId: 'expr_1',
      expressions: [{ id: 'expr_1', expression: STALLED }],
      metrics: [
        {
          id: 'visible',
          namespace: 'AWS/SQS',
          metricName: 'ApproximateNumberOfMessagesVisible',
          dimensions: { QueueName: QUEUE_NAME },
          stat: 'Maximum',
          periodSeconds: 60,
        },
        {
          id: 'delayed',
          namespace: 'AWS/SQS',
          metricName: 'ApproximateNumberOfMessagesDelayed',
          dimensions: { QueueName: QUEUE_NAME },
          stat: 'Maximum',
          periodSeconds: 60,
        },
        {
          id: 'applied',
          namespace: 'PacedJobs',
          metricName: 'Applied',
          dimensions: { job: JOB, service: JOB },
          stat: 'Sum',
          periodSeconds: 60,
        },
        {
          id: 'done',
          namespace: 'PacedJobs',
          metricName: 'AlreadyDone',
          dimensions: { job: JOB, service: JOB },
          stat: 'Sum',
          periodSeconds: 60,
        },
        {
          id: 'dead',
          namespace: 'PacedJobs',
          metricName: 'DeadLettered',
          dimensions: { job: JOB, service: JOB },
          stat: 'Sum',
          periodSeconds: 60,
        },
        {
          id: 'rejected',
          namespace: 'PacedJobs',
          metricName: 'Rejected',
          dimensions: { job: JOB, service: JOB },
          stat: 'Sum',
          periodSeconds: 60,
        },
      ],
    });
  });

  it('finds an alarm by logical ID too, and defaults DatapointsToAlarm to EvaluationPeriods and TreatMissingData to missing', () => {
    const alarm = readAlarm(
      template({ DatapointsToAlarm: undefined, TreatMissingData: undefined }),
      'AJobStalled',
      planResolveContext(plan()),
    );
    expect({ datapointsToAlarm: alarm.datapointsToAlarm, treatMissingData: alarm.treatMissingData }).toEqual({
      datapointsToAlarm: 15,
      treatMissingData: 'missing',
    });
  });

  it('reads a plain metric alarm as one MetricStat query', () => {
    const t: CloudFormationTemplate = {
      Resources: {
        Dlq: {
          Type: 'AWS::CloudWatch::Alarm',
          Properties: {
            AlarmName: 'dlq',
            ComparisonOperator: 'GreaterThanThreshold',
            EvaluationPeriods: 1,
            Threshold: 0,
            Namespace: 'AWS/SQS',
            MetricName: 'ApproximateNumberOfMessagesVisible',
            Dimensions: [{ Name: 'QueueName', Value: 'q' }],
            Statistic: 'Maximum',
            Period: 60,
          },
        },
      },
    };
    expect(readAlarm(t, 'dlq')).toMatchObject({
      returnId: 'm1',
      expressions: [],
      metrics: [{ id: 'm1', namespace: 'AWS/SQS', dimensions: { QueueName: 'q' }, stat: 'Maximum', periodSeconds: 60 }],
    });
  });

  it("resolves an event source mapping's Ref to the UUID its local mapping publishes its event counts under", () => {
    const p = plan();
    p.mappings.push({
      logicalId: 'AJobMapping',
      uuid: 'local-AJobMapping',
      functionName: 'consumer',
      eventSourceArn: p.queues[0].arn,
      batchSize: 10,
      maximumBatchingWindowSeconds: 0,
      reportBatchItemFailures: true,
      enabled: true,
    });
    const t = template();
    t.Resources.AJobMapping = { Type: 'AWS::Lambda::EventSourceMapping', Properties: {} };
    t.Resources.Failed = {
      Type: 'AWS::CloudWatch::Alarm',
      Properties: {
        AlarmName: 'Stack-a-job-consumer-failed-invokes',
        ComparisonOperator: 'GreaterThanThreshold',
        EvaluationPeriods: 1,
        Threshold: 0,
        TreatMissingData: 'notBreaching',
        Namespace: 'AWS/Lambda',
        MetricName: 'FailedInvokeEventCount',
        Dimensions: [{ Name: 'EventSourceMappingUUID', Value: { Ref: 'AJobMapping' } }],
        Statistic: 'Sum',
        Period: 300,
      },
    };
    const alarm = readAlarm(t, 'Stack-a-job-consumer-failed-invokes', planResolveContext(p));
    expect(alarm.metrics).toEqual([
      {
        id: 'm1',
        namespace: 'AWS/Lambda',
        metricName: 'FailedInvokeEventCount',
        dimensions: { EventSourceMappingUUID: 'local-AJobMapping' },
        stat: 'Sum',
        periodSeconds: 300,
      },
    ]);
    expect(() => readAlarm(t, 'Stack-a-job-consumer-failed-invokes', planResolveContext(plan()))).toThrow(
      'Ref AJobMapping: not a queue, function, table, bucket or event source mapping of the planned stack Stack',
    );
  });

  it('throws when no alarm has that name, naming what it looked for', () => {
    expect(() => readAlarm(template(), 'Stack-b-job-stalled', planResolveContext(plan()))).toThrow(
      new AlarmEvaluationError(
        'the template has no AWS::CloudWatch::Alarm named or with logical ID "Stack-b-job-stalled" (it has 1 alarm)',
      ),
    );
  });

  it('throws when an intrinsic needs a plan and none was given', () => {
    expect(() => readAlarm(template(), 'AJobStalled')).toThrow(
      "Fn::GetAtt AJobQueue.QueueName: pass a ResolveContext (planResolveContext(plan)) to resolve the alarm's intrinsics",
    );
  });

  it('throws on what it cannot evaluate: an anomaly detection operator, a percentile', () => {
    expect(() =>
      readAlarm(
        template({ ComparisonOperator: 'LessThanLowerOrGreaterThanUpperThreshold' }),
        'AJobStalled',
        planResolveContext(plan()),
      ),
    ).toThrow(
      'alarm AJobStalled: ComparisonOperator "LessThanLowerOrGreaterThanUpperThreshold" is not supported by the local evaluator (supported: GreaterThanThreshold, GreaterThanOrEqualToThreshold, LessThanThreshold, LessThanOrEqualToThreshold)',
    );
    const p99 = template({
      Metrics: [
        {
          Id: 'm',
          MetricStat: { Metric: { MetricName: 'Duration', Namespace: 'AWS/Lambda' }, Period: 60, Stat: 'p99' },
          ReturnData: true,
        },
      ],
    });
    expect(() => readAlarm(p99, 'AJobStalled')).toThrow(
      'alarm AJobStalled.Metrics[0]: statistic "p99" is not supported by the local evaluator (supported: Sum, Maximum, Minimum, Average, SampleCount)',
    );
  });
});

describe('Function: scaleAlarm', () => {
  it('shortens every period and the evaluation periods, keeping M of N as a share, and nothing else', () => {
    const scaled = scaleAlarm(stalled(), { periodSeconds: 2, evaluationPeriods: 3 });
    expect({
      periodSeconds: scaled.periodSeconds,
      evaluationPeriods: scaled.evaluationPeriods,
      datapointsToAlarm: scaled.datapointsToAlarm,
    }).toEqual({ periodSeconds: 2, evaluationPeriods: 3, datapointsToAlarm: 3 });
    expect(scaled.metrics.map((m) => m.periodSeconds)).toEqual([2, 2, 2, 2, 2, 2]);
    expect({ ...scaled, metrics: [], periodSeconds: 60, evaluationPeriods: 15, datapointsToAlarm: 15 }).toEqual({
      ...stalled(),
      metrics: [],
    });
    expect(
      scaleAlarm({ ...stalled(), datapointsToAlarm: 10 }, { periodSeconds: 2, evaluationPeriods: 3 }).datapointsToAlarm,
    ).toBe(2);
  });
});

describe('Function: parseMetricMath', () => {
  it('throws naming an unsupported function', () => {
    const expression = 'SUM(METRICS()) / 2';
    expect(() => parseMetricMath(expression)).toThrow(
      new UnsupportedMetricMathError(
        'SUM',
        expression,
        'metric math function SUM is not supported by the local alarm evaluator (it supports numbers, ids, + - * /, comparisons (== != < > <= >=), AND/OR, IF(cond, a, b) and FILL(m, value)): SUM(METRICS()) / 2',
      ),
    );
    try {
      parseMetricMath('m1 + ANOMALY_DETECTION_BAND(m1)');
    } catch (error) {
      expect(error).toBeInstanceOf(UnsupportedMetricMathError);
      expect((error as UnsupportedMetricMathError).unsupported).toBe('ANOMALY_DETECTION_BAND');
    }
  });

  it('throws naming an unsupported operator, filler or syntax', () => {
    expect(() => parseMetricMath('m1 ^ 2')).toThrow(
      'metric math operator ^ is not supported by the local alarm evaluator',
    );
    expect(() => parseMetricMath('FILL(m1, REPEAT)')).toThrow(
      'metric math name REPEAT is not supported by the local alarm evaluator',
    );
    expect(() => parseMetricMath('[m1, m2]')).toThrow('metric math arrays of time series ([m1, m2]) is not supported');
    expect(() => parseMetricMath('IF(m1 > 0, 1')).toThrow('metric math: expected ")" at character 12 of: IF(m1 > 0, 1');
    expect(() => parseMetricMath('FILL(m1)')).toThrow('metric math: FILL takes 2 arguments, got 1: FILL(m1)');
  });
});

describe('Function: evaluateQueries', () => {
  it("compares and combines as the user guide's example: a value missing in one of two time series is 0", () => {
    const values = { m1: [30, 20, 0, 0], m2: [20, undefined, 20, undefined] };
    expect(evaluate('(m1 < m2)', values, 4)).toEqual([0, 0, 1, 0]);
    expect(evaluate('(m1 >= 30)', values, 4)).toEqual([1, 0, 0, 0]);
    expect(evaluate('(m1 > 15 AND m2 > 15)', values, 4)).toEqual([1, 0, 0, 0]);
    expect(evaluate('m1 > 15 && m2 > 15 || m1 == 0', values, 4)).toEqual([1, 0, 1, 1]);
  });

  it('does arithmetic with precedence; against a scalar a time series keeps its gaps; dividing by zero drops the point', () => {
    const values = { m1: [1, undefined, 4, 6], m2: [2, 3, 0, undefined] };
    expect(evaluate('m1 + m2 * 2', values, 4)).toEqual([5, 6, 4, 6]);
    expect(evaluate('m1 * 10 - 1', values, 4)).toEqual([9, undefined, 39, 59]);
    expect(evaluate('-m1 + 1', values, 4)).toEqual([0, undefined, -3, -5]);
    expect(evaluate('m1 / m2', values, 4)).toEqual([0.5, 0, undefined, undefined]);
    expect(evaluate('m1 != 4', values, 4)).toEqual([1, undefined, 0, 1]);
  });

  it('fills missing datapoints with FILL, from a number or another time series, and only those', () => {
    const values = { m1: [undefined, 5, undefined, undefined], m2: [7, 8, undefined, 9] };
    expect(evaluate('FILL(m1, 0)', values, 4)).toEqual([0, 5, 0, 0]);
    expect(evaluate('FILL(m1, m2)', values, 4)).toEqual([7, 5, undefined, 9]);
    // No metric has data at all: without FILL the expression has no datapoint, with it every period has one.
    expect(evaluate('m3 + 1', values, 4)).toEqual([undefined, undefined, undefined, undefined]);
    expect(evaluate('FILL(m3, 0) + 1', values, 4)).toEqual([1, 1, 1, 1]);
  });

  it("chooses with IF as the user guide's tables do, missing branches included", () => {
    const values = { m1: [1, 1, 0, 0, undefined], m2: [30, undefined, 0, 0, 30], m3: [0, 0, 20, undefined, 20] };
    expect(evaluate('IF(m1, m2, m3)', values, 5)).toEqual([30, 0, 20, undefined, undefined]);
    expect(evaluate('IF(m1, 5, m3)', values, 5)).toEqual([5, 5, 20, undefined, undefined]);
    expect(evaluate('IF(m1, m2, 5)', values, 5)).toEqual([30, 0, 5, 5, undefined]);
    expect(evaluate('IF(m1, m2)', values, 5)).toEqual([30, 0, undefined, undefined, undefined]);
    expect(evaluate('IF(1, m2, m3)', values, 5)).toEqual([30, undefined, 0, 0, 30]);
  });

  it('evaluates the stalled expression per period: 1 only when work waits and nothing settles', () => {
    const samples = [
      // Minute 0: 5 visible, nothing settled. Minute 1: 3 delayed, nothing settled (two samples; Maximum is 3).
      sample('ApproximateNumberOfMessagesVisible', 0, 5),
      sample('ApproximateNumberOfMessagesDelayed', 1, 1, 10),
      sample('ApproximateNumberOfMessagesDelayed', 1, 3, 40),
      // Minute 2: waiting and settling (Applied sums two flushes of 2 and 3). Minute 3: a dead letter settles it.
      sample('ApproximateNumberOfMessagesVisible', 2, 9),
      sample('Applied', 2, 2),
      sample('Applied', 2, 3, 50),
      sample('ApproximateNumberOfMessagesVisible', 3, 4),
      sample('DeadLettered', 3, 1),
      // Minute 4: nothing reported at all (an idle queue): FILL makes it 0, not missing. Minute 5: an empty queue.
      sample('ApproximateNumberOfMessagesVisible', 5, 0),
      // Another job's settles and another queue's depth are other metrics (CloudWatch matches every dimension).
      { ...sample('Applied', 0, 10), dimensions: { service: 'other', job: 'other' } },
      { ...sample('Applied', 1, 10), dimensions: { service: JOB, job: JOB, function_name: 'x' } },
      { ...sample('ApproximateNumberOfMessagesVisible', 5, 7), dimensions: { QueueName: 'other' } },
    ];
    const values = evaluateQueries(stalled(), samples, T0, 6);
    expect(values.visible).toEqual([5, undefined, 9, 4, undefined, 0]);
    expect(values.delayed).toEqual([undefined, 3, undefined, undefined, undefined, undefined]);
    expect(values.applied).toEqual([undefined, undefined, 5, undefined, undefined, undefined]);
    expect(values.expr_1).toEqual([1, 1, 0, 0, 0, 0]);
  });

  it('throws when an expression names no query of the alarm, or is a scalar', () => {
    expect(() => evaluateQueries(simpleAlarm('m1 + nope'), [], T0, 1)).toThrow(
      'alarm Test: an expression refers to "nope", which is none of its queries (m1, m2, m3, e)',
    );
    expect(() => evaluateQueries(simpleAlarm('1 + 2'), [], T0, 1)).toThrow(
      'alarm Test: expression "e" is a scalar; CloudWatch needs every expression an alarm uses to be a time series: 1 + 2',
    );
  });
});

describe('Function: stateOf', () => {
  // The user guide's tables ("How alarm state is evaluated when data is missing"): 5 datapoints retrieved, oldest
  // first; 0 not breaching, X breaching, - missing. Columns: missing, ignore (previous state kept), breaching, notBreaching.
  const RETAIN = 'retain';
  const flags = (row: string) => row.split(' ').map((c) => (c === '-' ? undefined : c === 'X'));
  const cases = (m: number, rows: [string, string, string, string, string][]) =>
    rows.flatMap(([row, ...states]) =>
      (['missing', 'ignore', 'breaching', 'notBreaching'] as TreatMissingData[]).map((treat, i) => ({
        m,
        row,
        treat,
        expected: states[i],
      })),
    );

  it.each([
    ...cases(3, [
      ['0 - X - X', 'OK', 'OK', 'OK', 'OK'],
      ['0 - - - -', 'OK', 'OK', 'OK', 'OK'],
      ['- - - - -', 'INSUFFICIENT_DATA', RETAIN, 'ALARM', 'OK'],
      ['0 X X - X', 'ALARM', 'ALARM', 'ALARM', 'ALARM'],
      ['- - - - X', 'INSUFFICIENT_DATA', RETAIN, 'ALARM', 'OK'],
      ['X - - - -', 'ALARM', RETAIN, 'ALARM', 'OK'],
    ]),
    ...cases(2, [
      ['0 - X - X', 'ALARM', 'ALARM', 'ALARM', 'ALARM'],
      ['0 0 X 0 X', 'ALARM', 'ALARM', 'ALARM', 'ALARM'],
      ['0 - X - -', 'OK', 'OK', 'ALARM', 'OK'],
      ['- - - - 0', 'OK', 'OK', 'ALARM', 'OK'],
      ['- - - - X', 'INSUFFICIENT_DATA', RETAIN, 'ALARM', 'OK'],
    ]),
  ])('$m of 3, "$row", treat missing data as $treat: $expected', ({ m, row, treat, expected }) => {
    const alarm = { evaluationPeriods: 3, datapointsToAlarm: m, treatMissingData: treat };
    if (expected === RETAIN) {
      for (const previous of Object.values(AlarmState)) expect(stateOf(flags(row), alarm, previous)).toBe(previous);
    } else {
      expect(stateOf(flags(row), alarm, AlarmState.INSUFFICIENT_DATA)).toBe(expected);
    }
  });
});

describe('Function: evaluateAlarm', () => {
  const breachingMinutes = (pattern: string) => ({
    m1: pattern.split('').map((c) => (c === 'X' ? 1 : c === '0' ? 0 : undefined)),
  });
  const states = (alarm: AlarmDefinition, pattern: string) =>
    evaluateAlarm(alarm, seriesSamples(breachingMinutes(pattern)), {
      fromMs: T0,
      toMs: T0 + pattern.length * PERIOD_MS,
    }).map((p) => p.state);

  it('alarms only after EvaluationPeriods consecutive breaching periods, and one good period ends it', () => {
    const alarm = simpleAlarm('m1');
    expect(states(alarm, 'XX0XXX0X')).toEqual(['OK', 'OK', 'OK', 'OK', 'OK', 'ALARM', 'OK', 'OK']);
  });

  it('alarms on M of N breaching periods that need not be consecutive', () => {
    expect(states(simpleAlarm('m1', { datapointsToAlarm: 2 }), 'X0X00')).toEqual(['OK', 'OK', 'ALARM', 'OK', 'OK']);
  });

  it('treats missing datapoints as TreatMissingData says: not breaching, breaching, or kept state', () => {
    // Real datapoints anywhere in the evaluation range (5 periods for 3) count: the last 3 existing ones are X X X ...
    expect(states(simpleAlarm('m1'), 'XX-X')).toEqual(['OK', 'OK', 'OK', 'ALARM']);
    // ... and once one has left the range, the missing ones are filled (here as not breaching).
    expect(states(simpleAlarm('m1'), 'XX---X')).toEqual(['OK', 'OK', 'OK', 'OK', 'OK', 'OK']);
    // Breaching: the good datapoint keeps it OK until it leaves the range (the guide's "0 - - - -" row, and the next).
    expect(states(simpleAlarm('m1', { treatMissingData: 'breaching' }), '0-----')).toEqual([
      'OK',
      'OK',
      'OK',
      'OK',
      'OK',
      'ALARM',
    ]);
    expect(states(simpleAlarm('m1', { treatMissingData: 'ignore' }), '--XXX------')).toEqual([
      'INSUFFICIENT_DATA',
      'INSUFFICIENT_DATA',
      'INSUFFICIENT_DATA',
      'INSUFFICIENT_DATA',
      'ALARM',
      'ALARM',
      'ALARM',
      'ALARM',
      'ALARM',
      'ALARM',
      'ALARM',
    ]);
    expect(states(simpleAlarm('m1', { treatMissingData: 'missing' }), '---')).toEqual([
      'INSUFFICIENT_DATA',
      'INSUFFICIENT_DATA',
      'INSUFFICIENT_DATA',
    ]);
  });

  it("reports each period's bounds (aligned to the period), values and datapoint", () => {
    const [first, second] = evaluateAlarm(simpleAlarm('m1 * 2'), seriesSamples({ m1: [1, undefined] }), {
      fromMs: T0 + 10_000,
      toMs: T0 + 2 * PERIOD_MS + 5,
    });
    expect(first).toEqual({
      startMs: T0,
      endMs: T0 + PERIOD_MS,
      values: { m1: 1, m2: undefined, m3: undefined, e: 2 },
      value: 2,
      breaching: true,
      state: 'OK',
    });
    expect(second).toMatchObject({ startMs: T0 + PERIOD_MS, value: undefined, breaching: undefined, state: 'OK' });
  });

  it('runs the stalled alarm, scaled to 3 periods of 2 s, to ALARM on waiting work that never settles', () => {
    const alarm = scaleAlarm(stalled(), { periodSeconds: 2, evaluationPeriods: 3 });
    const at = (period: number) => T0 + period * 2000 + 500;
    const samples: MetricSample[] = [0, 1, 2, 3].map((p) => ({
      ...sample('ApproximateNumberOfMessagesVisible', 0, 10),
      timestamp: at(p),
    }));
    const periods = evaluateAlarm(alarm, samples, { fromMs: T0, toMs: T0 + 8000 });
    expect(periods.map((p) => [p.value, p.state])).toEqual([
      [1, 'OK'],
      [1, 'OK'],
      [1, 'ALARM'],
      [1, 'ALARM'],
    ]);
    // The same backlog settling something in period 2 never alarms.
    const settling = evaluateAlarm(alarm, [...samples, { ...sample('Applied', 0, 4), timestamp: at(2) }], {
      fromMs: T0,
      toMs: T0 + 8000,
    });
    expect(settling.map((p) => [p.value, p.state])).toEqual([
      [1, 'OK'],
      [1, 'OK'],
      [0, 'OK'],
      [1, 'OK'],
    ]);
  });
});
