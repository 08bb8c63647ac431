// The per-environment configuration values; schema.ts holds the defaults and the rules.
import type { EnvironmentInput } from './schema';

/** The application's tables and bucket, shaped as the jobs expect them; names differ per environment. */
const appResources = (suffix: string, create: boolean): EnvironmentInput['appResources'] => ({
  create,
  tables: {
    payments: {
      tableName: `payments-${suffix}`,
      partitionKey: { name: 'paymentId' },
      // Sparse index: a payment carries unsettledDate only until it is reconciled.
      globalSecondaryIndexes: [
        { indexName: 'unsettled-by-date', partitionKey: { name: 'unsettledDate' }, sortKey: { name: 'paymentId' } },
      ],
    },
    uploads: {
      tableName: `uploads-${suffix}`,
      partitionKey: { name: 'uploadId' },
      // Sparse index: an upload carries retentionState until its object and record are deleted.
      globalSecondaryIndexes: [
        { indexName: 'by-deadline', partitionKey: { name: 'retentionState' }, sortKey: { name: 'deleteAfter' } },
      ],
    },
    tenants: {
      tableName: `tenants-${suffix}`,
      partitionKey: { name: 'tenantId' },
    },
    sessions: {
      tableName: `sessions-${suffix}`,
      partitionKey: { name: 'tenantId' },
      sortKey: { name: 'sessionId' },
      globalSecondaryIndexes: [
        { indexName: 'by-last-seen', partitionKey: { name: 'tenantId' }, sortKey: { name: 'lastSeenAt' } },
      ],
    },
    // new-job: tables above (`npm run new-job -- <name>` inserts the new job's table here, in every environment)
  },
  // S3 names are global across accounts: a bucket this stack creates gets its name from CloudFormation (a fixed name
  // may already belong to another account, and the first deploy would fail); an imported one is the team's, by name.
  buckets: { uploads: create ? {} : { bucketName: `paced-jobs-uploads-${suffix}` } },
  secrets: { providerApiKey: { secretName: `paced-jobs/${suffix}/provider-api-key` } },
});

/** The environments this app deploys. */
type EnvironmentName = 'dev' | 'staging' | 'prod';

/** A job setting that differs between environments (a provider's sandbox and live API): each takes its own.
 * Exported for a new job's entry to use, so it stays declared when no example uses it. */
class PerEnvironment<T> {
  constructor(readonly values: Readonly<Record<EnvironmentName, T>>) {}
}
export const perEnvironment = <T>(values: Record<EnvironmentName, T>): PerEnvironment<T> => new PerEnvironment(values);

/** A config type whose every plain value may instead be a perEnvironment(...) of it. */
type Varying<T> = T extends readonly (infer U)[]
  ? Varying<U>[]
  : T extends object
    ? { [K in keyof T]: Varying<T[K]> }
    : T | PerEnvironment<T>;

/** Each perEnvironment(...) value in `value`, replaced by the environment's own. */
function resolveIn(env: EnvironmentName, value: unknown): unknown {
  if (value instanceof PerEnvironment) return value.values[env];
  if (Array.isArray(value)) return value.map((v) => resolveIn(env, v));
  if (typeof value === 'object' && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveIn(env, v)]));
  return value;
}

/**
 * The jobs as one environment configures them. A job's entry holds its own per-environment values, so deleting the
 * entry deletes them: nothing else in this file names a job.
 */
const inEnvironment = (env: EnvironmentName, jobs: Varying<EnvironmentInput['jobs']>): EnvironmentInput['jobs'] =>
  resolveIn(env, jobs) as EnvironmentInput['jobs'];

// Each job states its downstream's documented limits in `pacing`; batch size, batching window and the consumer's short
// wait are derived from the rate (lambda/core/pacingSettings.ts deriveBatching; `ops limits` shows them): 20 payments
// a batch at 80 starts a minute, waiting up to 16 s in the function for their slots; 50 at 480 and 2,400 a minute.
const jobs = (env: EnvironmentName): EnvironmentInput['jobs'] =>
  inEnvironment(env, {
    'payment-reconciliation': {
      schedule: { cron: '0 2 * * ? *', timeZone: 'Europe/London' },
      // The provider documents 100 requests a minute; we take 80 of them, ten payments in flight at most.
      pacing: { starts: 100, intervalSeconds: 60, concurrency: 10 },
      // 99% of a night's payments settled within 6 hours of 02:00. At 80 starts a minute a night holds 28,800: 58 pages
      // of 500 (29,000, 99% of them in 359 minutes). A bigger night stops at the page limit, and `ops status` says so.
      maxPagesPerRun: 58,
      slo: { objective: 0.99, completeWithinMinutes: 360 },
      // Discovery queries the unsettled index; apply reads the payment and records the outcome (lib/config/access.ts).
      uses: {
        tables: { payments: { ref: 'payments', discover: 'query', apply: ['get', 'update'] } },
        secrets: { apiKey: { ref: 'providerApiKey' } },
      },
      settings: {
        provider: 'acme',
        providerBaseUrl: perEnvironment({
          dev: 'https://sandbox.payments.example.com',
          staging: 'https://sandbox.payments.example.com',
          prod: 'https://api.payments.example.com',
        }),
      },
    },
    'stale-upload-cleanup': {
      schedule: { cron: '30 3 * * ? *', timeZone: 'UTC' },
      pacing: { starts: 3000, intervalSeconds: 60 },
      // 2,400 a minute settle a full run (100,000 uploads) in 42 minutes.
      slo: { objective: 0.99, completeWithinMinutes: 120 },
      // Discovery queries the deadline index; apply re-reads the record, deletes the object, then the record.
      uses: {
        tables: { uploads: { ref: 'uploads', discover: 'query', apply: ['get', 'delete'] } },
        buckets: { uploads: { ref: 'uploads', apply: 'delete' } },
      },
    },
    'expired-session-cleanup': {
      schedule: { cron: '15 1 * * ? *', timeZone: 'UTC' },
      pacing: { starts: 600, intervalSeconds: 60 },
      // 480 a minute settle 99% of a full run (100,000 tenants' sessions) in 207 minutes.
      slo: { objective: 0.99, completeWithinMinutes: 240 },
      // Discovery scans the tenants; apply queries a tenant's sessions by last seen and deletes the expired ones.
      uses: {
        tables: {
          tenants: { ref: 'tenants', discover: 'scan' },
          sessions: { ref: 'sessions', apply: ['query', 'delete'] },
        },
      },
      settings: { sessionMaxAgeDays: 30, deleteChunkSize: 25 },
    },
    // new-job: jobs above (`npm run new-job -- <name>` inserts the new job's configuration here, in every environment)
  });

// Where the alarms go. Replace it with your team's on-call address (SNS emails it a confirmation to accept):
// `ops preflight` fails while the alarm topic has no confirmed subscription, since an alarm nobody receives pages nobody.
const ALARM_EMAIL = 'paced-jobs-oncall@example.com';

// Who may send to the job queues besides the jobs' own functions (`ops redrive`, `ops continue`): the operators' role,
// by name in each environment's account. Replace it with your team's (e.g. an IAM Identity Center permission set's
// role: 'aws-reserved/sso.amazonaws.com/*AWSReservedSSO_PacedJobsOperator_*').
const OPERATOR_ROLES = ['paced-jobs-operator'];

export const environments: Record<EnvironmentName, EnvironmentInput> = {
  dev: {
    region: 'eu-west-1',
    alarmEmail: ALARM_EMAIL,
    appResources: appResources('dev', true),
    operatorRoles: OPERATOR_ROLES,
    jobs: jobs('dev'),
  },
  staging: {
    region: 'eu-west-1',
    retainData: true,
    alarmEmail: ALARM_EMAIL,
    appResources: appResources('staging', false),
    operatorRoles: OPERATOR_ROLES,
    jobs: jobs('staging'),
  },
  prod: {
    region: 'eu-west-1',
    // Changing ops commands need `--confirm prod` as well as `--yes`.
    protected: true,
    retainData: true,
    alarmEmail: ALARM_EMAIL,
    logRetentionDays: 90,
    appResources: appResources('prod', false),
    operatorRoles: OPERATOR_ROLES,
    jobs: jobs('prod'),
  },
};
