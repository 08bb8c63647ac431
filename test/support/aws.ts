// Test helpers: point the AWS SDK at embedded servers through the standard endpoint variables. They are the package's
// own (`paced-jobs/testing`, local/testing.ts), which a team's job tests use too; the suite imports them from here.
export { SHARED_LOCAL_AWS, startLocalAws, type LocalAws, type SharedLocalAws } from '../../local/testing';
