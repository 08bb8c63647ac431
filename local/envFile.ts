// `.local/env.sh`, written beside endpoints.json: the local stack's environment for any AWS client in a shell
// (`. .local/env.sh && aws dynamodb list-tables`). Local IAM is enforced, so a client needs the local credentials as
// well as the endpoints; a stock client with credentials of its own gets InvalidClientTokenId.
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The file's name, in the local folder beside endpoints.json. */
export const ENV_FILE = 'env.sh';

/** A value as one POSIX shell word: single-quoted, each quote inside closed, escaped and reopened. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/**
 * The script's text: one `export NAME='value'` a line, for the variables endpoints.json's `environment` lists
 * (AWS_REGION, the local credentials, AWS_ENDPOINT_URL_<SERVICE> for each endpoint), in that order.
 * AWS_DEFAULT_REGION too, after AWS_REGION: the AWS CLI v1 (botocore) reads only that one, the SDKs AWS_REGION. A session
 * token left in the shell would go with the local key and be refused, so the script unsets it. The AWS CLI v1 honours
 * every AWS_ENDPOINT_URL_<SERVICE> but SQS's: its `sqs` commands put the region's queue.amazonaws.com in its place
 * unless given `--endpoint-url "$AWS_ENDPOINT_URL_SQS"` (awscli/customizations/overridesslcommonname.py); the SDKs and
 * the CLI v2 need nothing more.
 * @throws Error when a name is not a shell variable name (it would run as a command)
 */
export function envScript(environment: Readonly<Record<string, string>>): string {
  const lines = [
    "# The local stack's environment for any AWS client, written by `npm start` (and `paced-jobs start`) beside",
    '# endpoints.json and rewritten each run. In a shell: . .local/env.sh && aws dynamodb list-tables',
    '# (the AWS CLI v1 takes SQS\'s endpoint only as a flag: aws sqs list-queues --endpoint-url "$AWS_ENDPOINT_URL_SQS")',
    'unset AWS_SESSION_TOKEN AWS_SECURITY_TOKEN',
  ];
  for (const [name, value] of Object.entries(environment)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`not a shell variable name: ${JSON.stringify(name)}`);
    lines.push(`export ${name}=${shellQuote(value)}`);
    if (name === 'AWS_REGION' && !('AWS_DEFAULT_REGION' in environment))
      lines.push(`export AWS_DEFAULT_REGION=${shellQuote(value)}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Writes `<localDir>/env.sh` whole, then renames it into place (a shell never sources half of it); returns its path. */
export function writeEnvFile(localDir: string, environment: Readonly<Record<string, string>>): string {
  const file = join(localDir, ENV_FILE);
  writeFileSync(`${file}.tmp`, envScript(environment));
  renameSync(`${file}.tmp`, file);
  return file;
}
