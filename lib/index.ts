// The package's main entry (`paced-jobs`): the construct a team adds to its own CDK stack, its props and its error.
// What a job's own code imports is `paced-jobs/job` (lambda/job.ts); nothing of the reference app is exported here.
export { PacedJobs } from './paced-jobs';
export type { BucketUse, JobProps, JobUses, PacedJobsProps, SecretUse, TableUse } from './paced-jobs';
export { InvalidPropsError } from './props-error';
export type { BucketMode, TableMode } from './config/access';
// The types of the construct's public handles (`pacedJobs.jobs['<name>'].queue`, `.monitoring.topic`, ...).
export type { PacedJob } from './paced-job';
export type { Monitoring } from './monitoring';
export type { StateTables } from './state-tables';
