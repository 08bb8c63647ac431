// Runs before every test file (and in test/support/globalSetup.ts, for its synths): keeps the AWS SDK's Node 20
// end-of-support notice out of test output (it is the machine's Node, not something a test can act on), makes sure
// no test can reach a real AWS account by accident, and turns off CDK's built-in CloudFormation validation for every
// synth a test runs, in its process or a child's (npm start in a copy of the project, a team's app): a WebAssembly
// schema check of every template, about 10 s of CPU a synth of the test app, whose findings are only warnings here.
// The tests about it turn it back on: test/bin/app.test.ts (every environment, zero findings) and
// test/package/pack.e2e.test.ts (a team's `cdk synth` as they run it).
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
process.env.AWS_ACCESS_KEY_ID ??= 'local';
process.env.AWS_SECRET_ACCESS_KEY ??= 'local';
process.env.AWS_REGION ??= 'us-east-1';
process.env.AWS_EC2_METADATA_DISABLED = 'true';
process.env.CDK_VALIDATION ??= 'false';
