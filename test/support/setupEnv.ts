// Runs before every test file: keeps the AWS SDK's Node 20 end-of-support notice out of test output (it is the
// machine's Node, not something a test can act on), and makes sure no test can reach a real AWS account by accident.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
process.env.AWS_ACCESS_KEY_ID ??= 'local';
process.env.AWS_SECRET_ACCESS_KEY ??= 'local';
process.env.AWS_REGION ??= 'us-east-1';
process.env.AWS_EC2_METADATA_DISABLED = 'true';
