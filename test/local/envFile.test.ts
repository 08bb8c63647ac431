// `.local/env.sh`'s text: what a shell that sources it exports, quoted so that no value can run as a command. That the
// AWS CLI then reaches a served stack with it is the docs' examples test's (test/docs/examples.e2e.test.ts).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENV_FILE, envScript, shellQuote, writeEnvFile } from '../../local/envFile';

const ENVIRONMENT = {
  AWS_REGION: 'eu-west-1',
  AWS_ACCESS_KEY_ID: 'S3RVER',
  AWS_SECRET_ACCESS_KEY: 'S3RVER',
  AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:41001',
  AWS_ENDPOINT_URL_SQS: 'http://127.0.0.1:41002',
  AWS_ENDPOINT_URL_SECRETS_MANAGER: 'http://127.0.0.1:41003',
};

describe('Function: shellQuote', () => {
  it.each([
    ['plain', "'plain'"],
    ['', "''"],
    ["it's", "'it'\\''s'"],
    ['$(rm -rf ~) `x` "y" \\ ;&|', '\'$(rm -rf ~) `x` "y" \\ ;&|\''],
  ])('quotes %j as one shell word', (value, quoted) => {
    expect(shellQuote(value)).toBe(quoted);
  });
});

describe('Function: envScript', () => {
  it("exports each variable of endpoints.json's environment, in its order, AWS_DEFAULT_REGION beside AWS_REGION", () => {
    expect(envScript(ENVIRONMENT)).toBe(
      [
        "# The local stack's environment for any AWS client, written by `npm start` (and `paced-jobs start`) beside",
        '# endpoints.json and rewritten each run. In a shell: . .local/env.sh && aws dynamodb list-tables',
        '# (the AWS CLI v1 takes SQS\'s endpoint only as a flag: aws sqs list-queues --endpoint-url "$AWS_ENDPOINT_URL_SQS")',
        'unset AWS_SESSION_TOKEN AWS_SECURITY_TOKEN',
        "export AWS_REGION='eu-west-1'",
        "export AWS_DEFAULT_REGION='eu-west-1'",
        "export AWS_ACCESS_KEY_ID='S3RVER'",
        "export AWS_SECRET_ACCESS_KEY='S3RVER'",
        "export AWS_ENDPOINT_URL_DYNAMODB='http://127.0.0.1:41001'",
        "export AWS_ENDPOINT_URL_SQS='http://127.0.0.1:41002'",
        "export AWS_ENDPOINT_URL_SECRETS_MANAGER='http://127.0.0.1:41003'",
        '',
      ].join('\n'),
    );
  });

  it('keeps an AWS_DEFAULT_REGION the environment states', () => {
    const script = envScript({ AWS_REGION: 'eu-west-1', AWS_DEFAULT_REGION: 'us-east-1' });
    expect(script.split('\n').filter((l) => l.startsWith('export'))).toEqual([
      "export AWS_REGION='eu-west-1'",
      "export AWS_DEFAULT_REGION='us-east-1'",
    ]);
  });

  it('refuses a name that is not a shell variable name', () => {
    expect(() => envScript({ 'AWS_X; rm -rf ~': 'v' })).toThrow('not a shell variable name: "AWS_X; rm -rf ~"');
  });
});

describe('Function: writeEnvFile', () => {
  it('writes <localDir>/env.sh whole, leaving no temporary file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'paced-jobs-env-'));
    try {
      expect(writeEnvFile(dir, ENVIRONMENT)).toBe(join(dir, ENV_FILE));
      expect(readFileSync(join(dir, 'env.sh'), 'utf8')).toBe(envScript(ENVIRONMENT));
      expect(readdirSync(dir)).toEqual(['env.sh']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
