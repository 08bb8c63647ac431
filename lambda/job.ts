// The job API, `paced-jobs/job`: everything a job's code may import from the engine, and nothing more. It is the
// package's semver surface for jobs: a name here keeps its meaning across minor releases; everything else under
// lambda/ is the engine's own and may change. The example jobs import only from here (and the SDK, zod and their own
// files); test/architecture/jobApi.test.ts keeps it so, and checks that every name here is documented.

// Defining a job: its discovery, apply and their types.
export {
  defineJob,
  operationsOf,
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
export { PacedJobsError, PermanentError, RetryableError, ThrottledError } from './core/errors';

// The job's deployed settings (JOB_SETTINGS): its tables, buckets and secrets by alias, its own `settings`.
export type { JobRuntimeSettings } from './core/constants';
export { JobSettingsReader } from './core/jobSettings';
export { SettingsError } from './core/settings';

// AWS clients configured once per container (endpoints from the standard AWS_ENDPOINT_URL_* variables), and the
// engine's edges a job reuses: counting a query, reading a secret, deleting an object.
export { documentClient, s3Client } from './adapters/clients';
export { countQuery, MAX_COUNT_PAGES } from './adapters/countQuery';
export {
  apiKeyGetter,
  secretStringGetter,
  SecretError,
  type SecretGetter,
  type SecretGetterOptions,
} from './adapters/secrets';
export { S3ObjectStore, type ObjectStore } from './adapters/s3Objects';

// Operation IDs (the idempotency keys) and page cursors.
export {
  assertOperationId,
  buildOperationId,
  idPartProblem,
  idPartSchema,
  InvalidOperationIdError,
  type OperationIdPart,
} from './core/operationIds';
export { decodeCursor, encodeCursor, InvalidCursorError } from './core/pageCursor';

// The message contract's business-date schema, for a resource that carries a date.
export { businessDateSchema } from './core/message';

// Business dates checked against apply's own clock, so a destructive apply never acts on a day not yet over.
export { futureBusinessDate, FutureBusinessDateError, type BusinessDateRule } from './core/businessDate';

// Calling another system: a Retry-After hint for ThrottledError, and personal data and secrets kept out of what is
// logged and kept (an error's cause, a failure reason).
export { parseRetryAfter } from './core/retryAfter';
export { personalDataHash, redactValue, sanitizedCause } from './core/privacy';

// A zod error as `<path>: <problem>` lines, as the engine writes its own: an invalid row's reason, an error's message.
export { describeIssues, type IssueFormat } from './core/issues';
