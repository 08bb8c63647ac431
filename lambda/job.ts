// The job API, `paced-jobs/job`: everything a job's code may import from the engine, and nothing more. It is the
// package's semver surface for jobs: a name here keeps its meaning across minor releases; everything else under
// lambda/ is the engine's own and may change. The example jobs import only from here (and the SDK, zod and their own
// files); test/architecture/jobApi.test.ts keeps it so.

// Defining a job: its discovery, apply and their types.
export {
  defineJob,
  operationsOf,
  type AnyJob,
  type ApplyRequest,
  type ApplyResult,
  type DiscoveredOperation,
  type DiscoverPage,
  type DiscoverRequest,
  type InvalidRow,
  type JobDefinition,
  type ResourceSchema,
} from './core/job';

// Outcomes apply throws: retry later, slow down, or never retry (the record goes to review).
export { PermanentError, RetryableError, ThrottledError } from './core/errors';

// The job's deployed settings (JOB_SETTINGS): its tables, buckets and secrets by alias, its own `settings`.
export type { JobRuntimeSettings } from './core/constants';
export { JobSettingsReader } from './core/jobSettings';
export { SettingsError } from './core/settings';

// AWS clients, configured once per container (endpoints from the standard AWS_ENDPOINT_URL_* variables).
export { documentClient, dynamoClient, s3Client, sqsClient } from './adapters/clients';
export { countQuery, MAX_COUNT_PAGES } from './adapters/countQuery';
export { apiKeyGetter, secretStringGetter, SecretError, type SecretGetter, type SecretGetterOptions } from './adapters/secrets';
export { S3ObjectStore, type ObjectStore } from './adapters/s3Objects';

// Operation IDs (the idempotency keys) and page cursors.
export { assertOperationId, idPartProblem, idPartSchema, InvalidOperationIdError, MAX_ID_PART_LENGTH } from './core/operationIds';
export { decodeCursor, encodeCursor, InvalidCursorError, MAX_CURSOR_LENGTH } from './core/pageCursor';

// The message contract's schemas a job's resource schema reuses.
export { businessDateSchema, idSchema, MAX_ID_LENGTH } from './core/message';

// Business dates, checked against the clock by a destructive apply; personal data kept out of logs.
export { assertNotFutureBusinessDate, businessDateFor, FutureBusinessDateError, futureBusinessDate, type BusinessDateRule } from './core/businessDate';
export { personalDataHash } from './core/privacy';
