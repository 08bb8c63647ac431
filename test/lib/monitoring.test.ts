// Monitoring: the prod template's per-job alarms (names, thresholds, actions), the alarm topic, the dashboard, and
// config reaching the thresholds and the email subscription, on the test environments (test/fixtures/environments.ts).
import * as path from 'node:path';
import { Lazy, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { loadEnvironment as loadFrom } from '../../lib/config/load';
import { environmentSchema } from '../../lib/config/schema';
import { alarmName, burnWindows, hasKeys, MAX_ALARM_DESCRIPTION_LENGTH, Monitoring } from '../../lib/monitoring';
import type { PacedJob } from '../../lib/paced-job';
import { InvalidPropsError } from '../../lib/props-error';
import { PacedJobsStack } from '../../lib/stack';
import { environments } from '../fixtures/environments';
import { testApp } from './cdkContext';
import { arnOf, logicalId, refOf, resourceOf } from './templateHelpers';

/** The code every custom stack's jobs are built on: the entry is bundled, never run, in these tests. */
const FAKE_JOB = path.join(__dirname, '..', 'fixtures', 'jobs', 'fake-job', 'index.ts');
/** The test environments, shaped as the reference app's, with jobs of their own. */
const loadEnvironment = (name: string) => loadFrom(name, environments);

/** The test environments' jobs, checked one by one below. */
const PROD_JOBS = ['payments-job', 'uploads-job', 'sessions-job'];
/** Every job prod configures, in config order. */
const ALL_PROD_JOBS = Object.keys(loadEnvironment('prod').jobs);

interface Built {
  stack: PacedJobsStack;
  template: Template;
}

function buildProd(): Built {
  const app = testApp();
  const stack = new PacedJobsStack(app, 'PacedJobs-prod', {
    environmentName: 'prod',
    config: loadEnvironment('prod'),
    jobEntry: () => FAKE_JOB,
  });
  return { stack, template: Template.fromStack(stack) };
}

/**
 * One job with non-default thresholds and an alarm email, and two jobs with keys (a per-key rate limit; per-key
 * concurrency alone), on the fixture handlers (fast to bundle). The example jobs have no keys.
 */
function buildCustom(): Built {
  const daily = { cron: '0 2 * * ? *', timeZone: 'UTC' };
  const config = environmentSchema.parse({
    region: 'eu-west-1',
    alarmEmail: 'oncall@example.com',
    jobs: {
      'a-job': {
        schedule: daily,
        pacing: { starts: 10 },
        oldestMessageAgeSloSeconds: 900,
        producerTimeoutSeconds: 60,
        alarms: { throttledPerMinute: 3, throttledMinutes: 2, producerDurationFraction: 0.5 },
      },
      'keyed-job': {
        schedule: daily,
        pacing: { starts: 10, perKey: { key: 'tenantId', starts: 2 } },
        oldestMessageAgeSloSeconds: 1200,
      },
      'leased-job': { schedule: daily, pacing: { starts: 10, perKey: { key: 'accountId', concurrency: 1 } } },
    },
  });
  const app = testApp();
  const stack = new PacedJobsStack(app, 'PacedJobs-custom', {
    environmentName: 'custom',
    config,
    jobEntry: () => FAKE_JOB,
  });
  return { stack, template: Template.fromStack(stack) };
}

/** The dashboard body as JSON, with every CloudFormation token inside it replaced by "<token>". */
function dashboardBody(template: Template): { widgets: { type: string; properties: Record<string, any> }[] } {
  const [dashboard] = Object.values(template.findResources('AWS::CloudWatch::Dashboard')) as {
    Properties: { DashboardBody: unknown };
  }[];
  const body = dashboard.Properties.DashboardBody as { 'Fn::Join': [string, unknown[]] };
  const text = body['Fn::Join'][1].map((part) => (typeof part === 'string' ? part : '<token>')).join('');
  return JSON.parse(text);
}

/** An alarm's rules when its first breaching period pages, and its recovery too (missing data is not breaching). */
const onFirstBreach = (topic: unknown) => ({
  ComparisonOperator: 'GreaterThanThreshold',
  EvaluationPeriods: 1,
  DatapointsToAlarm: 1,
  TreatMissingData: 'notBreaching',
  AlarmActions: [topic],
  OKActions: [topic],
});

let prod: Built;
let custom: Built;

beforeAll(() => {
  prod = buildProd();
  custom = buildCustom();
});

describe('Class: Monitoring', () => {
  describe('Method: constructor (per-job alarms in prod)', () => {
    it.each(PROD_JOBS)('alarms when the oldest message of %s is older than its SLO, notifying the topic', (jobName) => {
      const job = prod.stack.jobs[jobName];
      const topic = refOf(prod.stack.monitoring.topic);
      prod.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        AlarmName: `PacedJobs-prod-${jobName}-oldest-message-age`,
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateAgeOfOldestMessage',
        Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [logicalId(job.queue), 'QueueName'] } }],
        Statistic: 'Maximum',
        Period: 300,
        ComparisonOperator: 'GreaterThanThreshold',
        Threshold: 3600,
        EvaluationPeriods: 1,
        TreatMissingData: 'notBreaching',
        AlarmActions: [topic],
        OKActions: [topic],
        AlarmDescription: Match.stringLikeRegexp(`npm run ops -- status --stack PacedJobs-prod --job ${jobName}`),
      });
    });

    it.each(PROD_JOBS)('alarms on any message in the job DLQ and in the producer DLQ of %s', (jobName) => {
      const job = prod.stack.jobs[jobName];
      const topic = refOf(prod.stack.monitoring.topic);
      for (const [what, queue] of [
        ['dlq-depth', job.dlq],
        ['producer-dlq-depth', job.producerDlq],
      ] as const) {
        prod.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
          AlarmName: `PacedJobs-prod-${jobName}-${what}`,
          Namespace: 'AWS/SQS',
          MetricName: 'ApproximateNumberOfMessagesVisible',
          Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [logicalId(queue), 'QueueName'] } }],
          Statistic: 'Maximum',
          Period: 60,
          ComparisonOperator: 'GreaterThanThreshold',
          Threshold: 0,
          TreatMissingData: 'notBreaching',
          AlarmActions: [topic],
        });
      }
    });

    it('alarms on consumer errors and throttles and on producer errors, each above zero in 5 minutes', () => {
      const job = prod.stack.jobs['uploads-job'];
      const cases = [
        ['consumer-errors', job.consumer, 'Errors'],
        ['consumer-throttles', job.consumer, 'Throttles'],
        ['producer-errors', job.producer, 'Errors'],
      ] as const;
      for (const [what, fn, metricName] of cases) {
        prod.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
          AlarmName: `PacedJobs-prod-uploads-job-${what}`,
          Namespace: 'AWS/Lambda',
          MetricName: metricName,
          Dimensions: [{ Name: 'FunctionName', Value: refOf(fn) }],
          Statistic: 'Sum',
          Period: 300,
          Threshold: 0,
          ComparisonOperator: 'GreaterThanThreshold',
          TreatMissingData: 'notBreaching',
          AlarmActions: [refOf(prod.stack.monitoring.topic)],
        });
      }
    });

    it('alarms when the producer runs longer than 80% of its 300 s timeout', () => {
      prod.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        AlarmName: 'PacedJobs-prod-payments-job-producer-duration',
        Namespace: 'AWS/Lambda',
        MetricName: 'Duration',
        Dimensions: [{ Name: 'FunctionName', Value: refOf(prod.stack.jobs['payments-job'].producer) }],
        Statistic: 'Maximum',
        Period: 300,
        Threshold: 240000,
        ComparisonOperator: 'GreaterThanThreshold',
      });
    });

    it('alarms, per job, on any source row discovery recorded and skipped in 5 minutes, naming the command that lists them', () => {
      for (const jobName of ALL_PROD_JOBS) {
        prod.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
          AlarmName: `PacedJobs-prod-${jobName}-invalid-source-rows`,
          AlarmDescription: Match.stringLikeRegexp(
            `npm run ops -- audit --stack PacedJobs-prod --job ${jobName} --date <business date>`,
          ),
          Namespace: 'PacedJobs',
          MetricName: 'DiscoveryRowsRejected',
          Dimensions: [
            { Name: 'job', Value: jobName },
            { Name: 'service', Value: jobName },
          ],
          Statistic: 'Sum',
          Period: 300,
          Threshold: 0,
          ComparisonOperator: 'GreaterThanThreshold',
          TreatMissingData: 'notBreaching',
          AlarmActions: [refOf(prod.stack.monitoring.topic)],
        });
      }
    });

    it("alarms on the provider's throttling metric with the exact dimensions Powertools emits", () => {
      prod.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        AlarmName: 'PacedJobs-prod-sessions-job-provider-throttled',
        Namespace: 'PacedJobs',
        MetricName: 'Throttled',
        Dimensions: [
          { Name: 'job', Value: 'sessions-job' },
          { Name: 'service', Value: 'sessions-job' },
        ],
        Statistic: 'Sum',
        Period: 60,
        Threshold: 10,
        EvaluationPeriods: 5,
        DatapointsToAlarm: 5,
        TreatMissingData: 'notBreaching',
      });
    });

    it('alarms, per job, on waiting work with nothing settled for stalledMinutes consecutive minutes, not on a draining backlog', () => {
      for (const jobName of ALL_PROD_JOBS) {
        const job = prod.stack.jobs[jobName];
        const alarm = resourceOf(prod.template, prod.stack.monitoring.jobAlarms[jobName].Stalled).Properties;
        const byId = Object.fromEntries((alarm.Metrics as { Id: string }[]).map((m) => [m.Id, m])) as Record<
          string,
          any
        >;
        expect(alarm).toMatchObject({
          AlarmName: `PacedJobs-prod-${jobName}-stalled`,
          Threshold: 0,
          ComparisonOperator: 'GreaterThanThreshold',
          EvaluationPeriods: 15,
          DatapointsToAlarm: 15,
          TreatMissingData: 'notBreaching',
        });
        // Waiting = the work queue's visible + delayed messages; settled = every outcome the consumer meters, 0 when unwritten.
        const expression = (alarm.Metrics as { Expression?: string; ReturnData?: boolean }[]).find(
          (m) => m.ReturnData !== false,
        )!.Expression;
        expect(expression).toBe(
          'IF((FILL(visible, 0) + FILL(delayed, 0)) > 0 AND (FILL(applied, 0) + FILL(done, 0) + FILL(dead, 0) + FILL(rejected, 0)) == 0, 1, 0)',
        );
        const queueName = { 'Fn::GetAtt': [logicalId(job.queue), 'QueueName'] };
        expect(byId.visible.MetricStat).toMatchObject({
          Metric: {
            MetricName: 'ApproximateNumberOfMessagesVisible',
            Namespace: 'AWS/SQS',
            Dimensions: [{ Name: 'QueueName', Value: queueName }],
          },
          Period: 60,
          Stat: 'Maximum',
        });
        expect(byId.delayed.MetricStat).toMatchObject({
          Metric: {
            MetricName: 'ApproximateNumberOfMessagesDelayed',
            Namespace: 'AWS/SQS',
            Dimensions: [{ Name: 'QueueName', Value: queueName }],
          },
          Period: 60,
        });
        for (const [id, metricName] of [
          ['applied', 'Applied'],
          ['done', 'AlreadyDone'],
          ['dead', 'DeadLettered'],
          ['rejected', 'Rejected'],
        ]) {
          expect(byId[id].MetricStat).toMatchObject({
            Metric: {
              MetricName: metricName,
              Namespace: 'PacedJobs',
              Dimensions: expect.arrayContaining([{ Name: 'job', Value: jobName }]),
            },
            Period: 60,
            Stat: 'Sum',
          });
        }
        expect(alarm.AlarmDescription).toContain(`npm run ops -- status --stack PacedJobs-prod --job ${jobName}`);
      }
    });

    it("pages and tickets on the SLO's burn rate: per job two pairs, each a long and a short window both over its rate", () => {
      const expr = (budget: number) =>
        `IF(FILL(met, 0) + FILL(missed, 0) + FILL(failed, 0) > 0, (FILL(missed, 0) + FILL(failed, 0)) / (FILL(met, 0) + FILL(missed, 0) + FILL(failed, 0)), 0) / ${budget}`;
      // payments-job: 99% within 360 min. Fast: 60 min (capped) and 5 min over 6x; slow: 180 and 15 min over 2x.
      const windows = {
        fast: [
          ['long', 60],
          ['short', 5],
        ],
        slow: [
          ['long', 180],
          ['short', 15],
        ],
      } as const;
      for (const [kind, rate] of [
        ['fast', 6],
        ['slow', 2],
      ] as const) {
        const composite = resourceOf(prod.template, prod.stack.monitoring.burnAlarms['payments-job'][kind]).Properties;
        expect(composite.AlarmName).toBe(`PacedJobs-prod-payments-job-burn-${kind}`);
        expect(composite.AlarmActions).toEqual([refOf(prod.stack.monitoring.topic)]);
        expect(composite.AlarmDescription).toContain(
          'First run `npm run ops -- status --stack PacedJobs-prod --job payments-job`',
        );
        for (const [which, minutes] of windows[kind]) {
          const name = `PacedJobs-prod-payments-job-burn-${kind}-${which}`;
          const [id, resource] = Object.entries(prod.template.findResources('AWS::CloudWatch::Alarm')).find(
            ([, a]) => a.Properties.AlarmName === name,
          )!;
          // The composite requires this window's alarm in ALARM (AND the pair's other one).
          expect(JSON.stringify(composite.AlarmRule)).toContain(`{"Fn::GetAtt":["${id}","Arn"]}`);
          expect(JSON.stringify(composite.AlarmRule)).toContain(') AND ALARM(');
          const alarm = resource.Properties;
          expect(alarm).toMatchObject({
            Threshold: rate,
            ComparisonOperator: 'GreaterThanThreshold',
            EvaluationPeriods: 1,
            TreatMissingData: 'notBreaching',
          });
          const metrics = alarm.Metrics as {
            Id: string;
            Expression?: string;
            MetricStat?: { Metric: { MetricName: string }; Period: number; Stat: string };
          }[];
          expect(metrics.find((m) => m.Expression)!.Expression).toBe(expr(0.01));
          expect(
            metrics
              .filter((m) => m.MetricStat)
              .map((m) => [m.Id, m.MetricStat!.Metric.MetricName, m.MetricStat!.Period, m.MetricStat!.Stat]),
          ).toEqual([
            ['met', 'SloMet', minutes * 60, 'Sum'],
            ['missed', 'SloMissed', minutes * 60, 'Sum'],
            ['failed', 'SloFailed', minutes * 60, 'Sum'],
          ]);
        }
      }
    });

    it("scales the burn windows to the SLO's own window, within bounds", () => {
      expect(burnWindows('fast', 120)).toEqual({ longMinutes: 20, shortMinutes: 2 });
      expect(burnWindows('slow', 120)).toEqual({ longMinutes: 60, shortMinutes: 5 });
      expect(burnWindows('fast', 10)).toEqual({ longMinutes: 5, shortMinutes: 1 });
      expect(burnWindows('slow', 2880)).toEqual({ longMinutes: 360, shortMinutes: 30 });
    });

    it.each(PROD_JOBS)(
      'alarms on failed invokes and dropped events of both event sources of %s, per mapping UUID',
      (jobName) => {
        const job = prod.stack.jobs[jobName];
        const topic = refOf(prod.stack.monitoring.topic);
        const uuid = (source: typeof job.eventSource) =>
          Stack.of(job).resolve(source.eventSourceMappingId) as { Ref: string };
        const cases = [
          [
            'consumer-dropped-events',
            job.eventSource,
            'DroppedEventCount',
            /not in the job DLQ, so those operations may never run/,
          ],
          [
            'admission-failed-invokes',
            job.admissionEventSource,
            'FailedInvokeEventCount',
            /after 5 receives the step goes to the producer DLQ/,
          ],
          [
            'admission-dropped-events',
            job.admissionEventSource,
            'DroppedEventCount',
            /that run's admission has stopped and no DLQ message shows it/,
          ],
        ] as const;
        for (const [what, source, metricName, means] of cases) {
          prod.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
            AlarmName: `PacedJobs-prod-${jobName}-${what}`,
            Namespace: 'AWS/Lambda',
            MetricName: metricName,
            // The mapping's Ref is its UUID.
            Dimensions: [{ Name: 'EventSourceMappingUUID', Value: uuid(source) }],
            Statistic: 'Sum',
            Period: 300,
            Threshold: 0,
            ...onFirstBreach(topic),
            AlarmDescription: Match.stringLikeRegexp(means.source),
          });
        }
        expect(uuid(job.eventSource)).not.toEqual(uuid(job.admissionEventSource));
      },
    );

    it.each(PROD_JOBS)(
      'alarms on the consumer mapping of %s when most polled events fail to invoke for 15 minutes, not on one retried record',
      (jobName) => {
        const job = prod.stack.jobs[jobName];
        const topic = refOf(prod.stack.monitoring.topic);
        const uuid = Stack.of(job).resolve(job.eventSource.eventSourceMappingId) as { Ref: string };
        const alarm = resourceOf(
          prod.template,
          prod.stack.monitoring.jobAlarms[jobName].ConsumerFailedInvokes,
        ).Properties;
        expect(alarm).toMatchObject({
          AlarmName: `PacedJobs-prod-${jobName}-consumer-failed-invokes`,
          ComparisonOperator: 'GreaterThanThreshold',
          Threshold: 0.5,
          EvaluationPeriods: 3,
          DatapointsToAlarm: 3,
          TreatMissingData: 'notBreaching',
          AlarmActions: [topic],
          OKActions: [topic],
        });
        expect(alarm.AlarmDescription).toMatch(
          /for 15 minutes more than 50% of the messages .* could not invoke the consumer at all/s,
        );
        const metrics = alarm.Metrics as {
          Id: string;
          Expression?: string;
          ReturnData?: boolean;
          MetricStat?: unknown;
        }[];
        expect(metrics.find((m) => m.ReturnData !== false)!.Expression).toBe(
          'IF(FILL(polled, 0) > 0, FILL(failed, 0) / polled, 0)',
        );
        const byId = Object.fromEntries(metrics.map((m) => [m.Id, m]));
        for (const [id, metricName] of [
          ['polled', 'PolledEventCount'],
          ['failed', 'FailedInvokeEventCount'],
        ]) {
          expect(byId[id].MetricStat).toEqual({
            Metric: {
              Namespace: 'AWS/Lambda',
              MetricName: metricName,
              Dimensions: [{ Name: 'EventSourceMappingUUID', Value: uuid }],
            },
            Period: 300,
            Stat: 'Sum',
          });
        }
      },
    );

    it("alarms, for a job with keys only, on the age of its quiet tenants' oldest message, at the oldest-message-age threshold", () => {
      const topic = refOf(custom.stack.monitoring.topic);
      for (const [jobName, slo] of [
        ['keyed-job', 1200],
        ['leased-job', 3600],
      ] as const) {
        const job = custom.stack.jobs[jobName];
        const alarms = custom.stack.monitoring.jobAlarms[jobName];
        expect(resourceOf(custom.template, alarms.QuietTenantsMessageAge!).Properties).toMatchObject({
          AlarmName: `PacedJobs-custom-${jobName}-quiet-tenants-message-age`,
          AlarmDescription: expect.stringContaining(
            `the oldest message of the quiet tenants (the keys SQS fair queues do not hold back as noisy) is older than the ${slo}s SLO`,
          ),
          Namespace: 'AWS/SQS',
          MetricName: 'ApproximateAgeOfOldestMessageInQuietGroups',
          Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [logicalId(job.queue), 'QueueName'] } }],
          Statistic: 'Maximum',
          Period: 300,
          Threshold: slo,
          ...onFirstBreach(topic),
        });
        expect(resourceOf(custom.template, alarms.OldestMessageAge).Properties.Threshold).toBe(slo);
      }
      expect(custom.stack.monitoring.jobAlarms['a-job'].QuietTenantsMessageAge).toBeUndefined();
      const quiet = (template: Template) =>
        Object.values(template.findResources('AWS::CloudWatch::Alarm'))
          .filter((a) => a.Properties.MetricName === 'ApproximateAgeOfOldestMessageInQuietGroups')
          .map((a) => a.Properties.AlarmName as string);
      expect(quiet(custom.template).sort()).toEqual([
        'PacedJobs-custom-keyed-job-quiet-tenants-message-age',
        'PacedJobs-custom-leased-job-quiet-tenants-message-age',
      ]);
      const keyedProdJobs = Object.entries(loadEnvironment('prod').jobs)
        .filter(([, config]) => hasKeys(config))
        .map(([name]) => name);
      expect(quiet(prod.template)).toEqual(keyedProdJobs.map((j) => `PacedJobs-prod-${j}-quiet-tenants-message-age`));
    });

    it("uses as the metric's service dimension the service name the consumer is given", () => {
      const job = prod.stack.jobs['payments-job'];
      const variables = resourceOf(prod.template, job.consumer).Properties.Environment.Variables;
      const alarm = resourceOf(prod.template, prod.stack.monitoring.jobAlarms['payments-job'].ProviderThrottled);
      expect(alarm.Properties.Dimensions).toContainEqual({ Name: 'service', Value: variables.POWERTOOLS_SERVICE_NAME });
      expect(variables.POWERTOOLS_METRICS_NAMESPACE).toBe(alarm.Properties.Namespace);
    });
  });

  describe('Method: constructor (schedule group alarms)', () => {
    it("alarms on the environment's own schedule group's target errors", () => {
      prod.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        AlarmName: 'PacedJobs-prod-schedule-group-paced-jobs-prod-target-errors',
        Namespace: 'AWS/Scheduler',
        MetricName: 'TargetErrorCount',
        Dimensions: [{ Name: 'ScheduleGroup', Value: 'paced-jobs-prod' }],
        Statistic: 'Sum',
        Period: 300,
        Threshold: 0,
        TreatMissingData: 'notBreaching',
        AlarmActions: [refOf(prod.stack.monitoring.topic)],
      });
    });

    it("watches the stack's own schedule group only, never the account's default group", () => {
      const group = resourceOf(prod.template, prod.stack.scheduleGroup).Properties.Name;
      expect(Object.keys(prod.stack.monitoring.schedulerAlarms)).toEqual([group]);
      // Every ScheduleGroup dimension of every alarm, plain or in a metric query.
      const dimensions = Object.values(prod.template.findResources('AWS::CloudWatch::Alarm'))
        .flatMap((a) => [
          ...(a.Properties.Dimensions ?? []),
          ...(a.Properties.Metrics ?? []).flatMap(
            (m: { MetricStat?: { Metric: { Dimensions?: unknown[] } } }) => m.MetricStat?.Metric.Dimensions ?? [],
          ),
        ])
        .filter((d: { Name: string }) => d.Name === 'ScheduleGroup');
      expect(dimensions.length).toBeGreaterThan(0);
      expect(dimensions).toEqual(dimensions.map(() => ({ Name: 'ScheduleGroup', Value: group })));
      for (const alarm of Object.values(prod.stack.monitoring.schedulerAlarms[group])) {
        expect(resourceOf(prod.template, alarm).Properties.AlarmDescription).not.toMatch(/default group/);
      }
    });

    it('alarms on scheduled runs that were dropped or could not reach the DLQ', () => {
      const stat = (metricName: string) => ({
        Metric: {
          Dimensions: [{ Name: 'ScheduleGroup', Value: 'paced-jobs-prod' }],
          MetricName: metricName,
          Namespace: 'AWS/Scheduler',
        },
        Period: 300,
        Stat: 'Sum',
      });
      prod.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        AlarmName: 'PacedJobs-prod-schedule-group-paced-jobs-prod-failed-invocations',
        Metrics: [
          {
            Expression: 'FILL(dropped, 0) + FILL(undeliverable, 0)',
            Id: 'expr_1',
            Label: 'Lost scheduled runs',
            ReturnData: true,
          },
          { Id: 'dropped', Label: 'Dropped', MetricStat: stat('InvocationDroppedCount'), ReturnData: false },
          {
            Id: 'undeliverable',
            Label: 'Failed to reach the DLQ',
            MetricStat: stat('InvocationsFailedToBeSentToDeadLetterCount'),
            ReturnData: false,
          },
        ],
        Threshold: 0,
        ComparisonOperator: 'GreaterThanThreshold',
        TreatMissingData: 'notBreaching',
        AlarmActions: [refOf(prod.stack.monitoring.topic)],
      });
    });

    it('names every alarm after the stack, so the topic policy can admit exactly these', () => {
      const names = Object.values(prod.template.findResources('AWS::CloudWatch::Alarm')).map(
        (a) => a.Properties.AlarmName as string,
      );
      expect(names.filter((n) => !n.startsWith('PacedJobs-prod-'))).toEqual([]);
      // Fourteen per job (and one more for a job with keys), two per schedule group, and the four windows of each job's
      // two burn-rate pairs (its composites apart).
      const keyed = Object.values(loadEnvironment('prod').jobs).filter(hasKeys).length;
      expect(names).toHaveLength(ALL_PROD_JOBS.length * (14 + 4) + keyed + 2);
      const composites = Object.values(prod.template.findResources('AWS::CloudWatch::CompositeAlarm')).map(
        (a) => a.Properties.AlarmName as string,
      );
      expect(composites.sort()).toEqual(
        ALL_PROD_JOBS.flatMap((j) => [`PacedJobs-prod-${j}-burn-fast`, `PacedJobs-prod-${j}-burn-slow`]).sort(),
      );
    });

    it("keeps every description within CloudWatch's 1024 characters and points to the runbook", () => {
      const descriptions = Object.values(prod.template.findResources('AWS::CloudWatch::Alarm')).map(
        (a) => a.Properties.AlarmDescription as string,
      );
      expect(descriptions.filter((d) => d.length > MAX_ALARM_DESCRIPTION_LENGTH)).toEqual([]);
      expect(
        descriptions.filter((d) => !d.endsWith('See the runbook, docs/operating.md, "Reading an alarm".')),
      ).toEqual([]);
    });
  });

  describe('Method: constructor (topic)', () => {
    it('encrypts the topic with its own rotating key, retained in prod', () => {
      const { topic, topicKey } = prod.stack.monitoring;
      prod.template.hasResourceProperties('AWS::SNS::Topic', {
        DisplayName: 'Paced jobs prod alarms',
        KmsMasterKeyId: arnOf(topicKey),
      });
      expect(resourceOf(prod.template, topicKey)).toMatchObject({
        DeletionPolicy: 'Retain',
        Properties: { EnableKeyRotation: true },
      });
      expect(resourceOf(prod.template, topic).Properties.KmsMasterKeyId).toEqual(arnOf(topicKey));
    });

    it("lets CloudWatch use the key, since SNS encrypts with the publisher's access", () => {
      prod.template.hasResourceProperties('AWS::KMS::Key', {
        KeyPolicy: {
          Statement: Match.arrayWith([
            {
              Action: ['kms:Decrypt', 'kms:GenerateDataKey*'],
              Effect: 'Allow',
              Principal: { Service: 'cloudwatch.amazonaws.com' },
              Resource: '*',
            },
          ]),
        },
      });
    });

    it("denies publishing without TLS and admits CloudWatch only for this stack's alarms", () => {
      const topic = refOf(prod.stack.monitoring.topic);
      prod.template.hasResourceProperties('AWS::SNS::TopicPolicy', {
        Topics: [topic],
        PolicyDocument: {
          Statement: [
            {
              Sid: 'AllowPublishThroughSSLOnly',
              Effect: 'Deny',
              Principal: '*',
              Action: 'sns:Publish',
              Resource: topic,
              Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            },
            {
              Sid: 'AllowThisStacksAlarmsToPublish',
              Effect: 'Allow',
              Principal: { Service: 'cloudwatch.amazonaws.com' },
              Action: 'sns:Publish',
              Resource: topic,
              Condition: {
                StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
                ArnLike: {
                  'aws:SourceArn': {
                    'Fn::Join': [
                      '',
                      [
                        'arn:',
                        { Ref: 'AWS::Partition' },
                        ':cloudwatch:',
                        { Ref: 'AWS::Region' },
                        ':',
                        { Ref: 'AWS::AccountId' },
                        ':alarm:PacedJobs-prod-*',
                      ],
                    ],
                  },
                },
              },
            },
          ],
        },
      });
    });

    it('subscribes no one when alarmEmail is not configured', () => {
      const config = environmentSchema.parse({
        region: 'eu-west-1',
        jobs: { 'a-job': { schedule: { cron: '0 2 * * ? *', timeZone: 'UTC' }, pacing: { starts: 10 } } },
      });
      const stack = new PacedJobsStack(testApp(), 'PacedJobs-quiet', {
        environmentName: 'quiet',
        config,
        jobEntry: () => FAKE_JOB,
      });
      expect(Template.fromStack(stack).findResources('AWS::SNS::Subscription')).toEqual({});
    });

    it("subscribes the environment's alarmEmail in prod", () => {
      prod.template.hasResourceProperties('AWS::SNS::Subscription', {
        Protocol: 'email',
        Endpoint: loadEnvironment('prod').alarmEmail,
        TopicArn: refOf(prod.stack.monitoring.topic),
      });
    });

    it('subscribes the configured alarmEmail to the topic', () => {
      custom.template.hasResourceProperties('AWS::SNS::Subscription', {
        Protocol: 'email',
        Endpoint: 'oncall@example.com',
        TopicArn: refOf(custom.stack.monitoring.topic),
      });
    });

    it('outputs the topic ARN as AlarmTopicArn', () => {
      prod.template.hasOutput('AlarmTopicArn', { Value: refOf(prod.stack.monitoring.topic) });
    });
  });

  describe('Method: constructor (thresholds from config)', () => {
    it("uses the job's SLO, throttling threshold and producer duration fraction", () => {
      const at = (what: string) => ({ AlarmName: alarmName('PacedJobs-custom', 'a-job', what) });
      custom.template.hasResourceProperties('AWS::CloudWatch::Alarm', { ...at('oldest-message-age'), Threshold: 900 });
      custom.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        ...at('provider-throttled'),
        Threshold: 3,
        EvaluationPeriods: 2,
        DatapointsToAlarm: 2,
      });
      custom.template.hasResourceProperties('AWS::CloudWatch::Alarm', { ...at('producer-duration'), Threshold: 30000 });
    });

    it('destroys the topic key with a stack that keeps no data (retainData false)', () => {
      expect(resourceOf(custom.template, custom.stack.monitoring.topicKey).DeletionPolicy).toBe('Delete');
    });
  });

  describe('Method: constructor (dashboard)', () => {
    it('names the dashboard after the stack and gives every job a titled section', () => {
      prod.template.hasResourceProperties('AWS::CloudWatch::Dashboard', { DashboardName: 'PacedJobs-prod' });
      const headings = dashboardBody(prod.template)
        .widgets.filter((w) => w.type === 'text')
        .map((w) => (w.properties.markdown as string).split('\n')[0]);
      expect(headings).toEqual([...ALL_PROD_JOBS.map((j) => `## ${j}`), '## Schedule group paced-jobs-prod']);
    });

    it("graphs each job's outcome metrics and its p99 age since first enqueue, with Powertools' dimensions", () => {
      const widgets = dashboardBody(prod.template).widgets;
      const byTitle = (title: string) => widgets.find((w) => w.properties.title === title)?.properties;
      const dims = ['job', 'payments-job', 'service', 'payments-job'];
      expect(byTitle('payments-job: outcomes')?.metrics).toEqual(
        [
          'Applied',
          'DuplicatesSuppressed',
          'Deferred',
          'Throttled',
          'Rejected',
          'DeadLettered',
          'DiscoveryRowsRejected',
        ].map((name) => ['PacedJobs', name, ...dims, { label: name, stat: 'Sum' }]),
      );
      expect(byTitle('payments-job: age since first enqueue')?.metrics).toEqual([
        ['PacedJobs', 'AgeSinceFirstEnqueue', ...dims, { label: 'p99 (ms)', stat: 'p99' }],
      ]);
    });

    it("graphs each job's queue, DLQs and consumer, and shows its alarms", () => {
      const titles = dashboardBody(prod.template)
        .widgets.map((w) => w.properties.title)
        .filter((t) => typeof t === 'string');
      for (const job of PROD_JOBS) {
        expect(titles).toEqual(
          expect.arrayContaining(
            [
              'work queue',
              'dead-letter queues',
              'producer',
              'consumer',
              'consumer event source',
              'admission event source',
              'alarms',
            ].map((what) => `${job}: ${what}`),
          ),
        );
      }
    });

    it("graphs each event source's counts per mapping UUID, and a job with keys' quiet tenants' oldest message", () => {
      const byTitle = (template: Template, title: string) =>
        dashboardBody(template).widgets.find((w) => w.properties.title === title)?.properties;
      const counts = [
        'PolledEventCount',
        'InvokedEventCount',
        'FailedInvokeEventCount',
        'DroppedEventCount',
        'DeletedEventCount',
      ];
      for (const what of ['consumer', 'admission']) {
        const metrics = byTitle(prod.template, `payments-job: ${what} event source`)?.metrics as unknown[][];
        expect(metrics.map((m) => m.slice(0, 3))).toEqual(
          counts.map((name) => ['AWS/Lambda', name, 'EventSourceMappingUUID']),
        );
      }
      const ages = (template: Template, job: string) =>
        ((byTitle(template, `${job}: work queue`)?.metrics ?? []) as unknown[][])
          .filter((m) => (m[1] as string).startsWith('ApproximateAgeOfOldestMessage'))
          .map((m) => m[1]);
      expect(ages(custom.template, 'keyed-job')).toEqual([
        'ApproximateAgeOfOldestMessage',
        'ApproximateAgeOfOldestMessageInQuietGroups',
      ]);
      expect(ages(custom.template, 'a-job')).toEqual(['ApproximateAgeOfOldestMessage']);
    });
  });

  describe('Method: constructor (validation)', () => {
    it('refuses alarm names that would repeat, before building anything', () => {
      const job = { jobName: 'a-job', pacedJob: custom.stack.jobs['a-job'], config: loadJob() };
      let error: unknown;
      try {
        new Monitoring(custom.stack, 'Again', {
          environmentName: 'custom',
          operatorCommand: 'npx paced-jobs ops',
          jobs: [job, job],
          retainData: false,
        });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(InvalidPropsError);
      expect((error as Error).message).toBe(
        [
          'Invalid props for Monitoring PacedJobs-custom/Again:',
          ...[
            'oldest-message-age',
            'dlq-depth',
            'producer-dlq-depth',
            'consumer-errors',
            'consumer-throttles',
            'producer-errors',
            'producer-duration',
            'provider-throttled',
            'stalled',
            'invalid-source-rows',
            'consumer-failed-invokes',
            'consumer-dropped-events',
            'admission-failed-invokes',
            'admission-dropped-events',
          ].map(
            (what) =>
              `  - alarm name "PacedJobs-custom-a-job-${what}" is used twice (a job name repeats, or clashes with a schedule group's alarms)`,
          ),
        ].join('\n'),
      );
      expect(custom.stack.node.tryFindChild('Again')).toBeUndefined();
    });

    it("refuses a schedule group whose name is not a literal: it is in the alarms' names", () => {
      const pacedJob = Object.assign(Object.create(custom.stack.jobs['a-job']) as PacedJob, {
        scheduleGroup: { scheduleGroupName: Lazy.string({ produce: () => 'later' }) },
      });
      expect(
        () =>
          new Monitoring(custom.stack, 'Unnamed', {
            environmentName: 'custom',
            operatorCommand: 'npx paced-jobs ops',
            jobs: [{ jobName: 'a-job', pacedJob, config: loadJob() }],
            retainData: false,
          }),
      ).toThrow(
        "Invalid props for Monitoring PacedJobs-custom/Unnamed:\n  - a-job: its schedule group's name must be a literal: it is in the Scheduler alarms' names and their ScheduleGroup dimension",
      );
      expect(custom.stack.node.tryFindChild('Unnamed')).toBeUndefined();
    });

    it('refuses an empty job list', () => {
      expect(
        () =>
          new Monitoring(custom.stack, 'Empty', {
            environmentName: 'custom',
            operatorCommand: 'npx paced-jobs ops',
            jobs: [],
            retainData: false,
          }),
      ).toThrow('Invalid props for Monitoring PacedJobs-custom/Empty:\n  - jobs: at least one job is required');
    });
  });
});

function loadJob() {
  return environmentSchema.parse({
    region: 'eu-west-1',
    jobs: { 'a-job': { schedule: { cron: '0 2 * * ? *', timeZone: 'UTC' }, pacing: { starts: 10 } } },
  }).jobs['a-job'];
}
