// A team's CDK app as issue #35 describes it, for test/package/pack.e2e.test.ts: its cdk.json and tsconfig.json, the
// issue's stack word for word (its own table, one PacedJobs job writing to it through `uses`), and the job, which
// imports only paced-jobs/job (and the SDK and zod).

/** The job's name. */
export const JOB = 'usage-report';
/** Operations per run: one per account (`settings.accounts`). */
export const ACCOUNTS = 30;

/** The app's files, as a team writes them following the README (the stack is the issue's, word for word). */
export const APP_FILES: Record<string, string> = {
  'cdk.json': `${JSON.stringify({ app: 'npx tsx bin/app.ts' }, null, 2)}\n`,
  'tsconfig.json': `${JSON.stringify(
    {
      // `types`: TypeScript 6 and later no longer include every @types package by default, and the stack uses Node's
      // path and __dirname (@types/node comes with the package).
      compilerOptions: { target: 'ES2022', module: 'node16', moduleResolution: 'node16', strict: true, skipLibCheck: true, noEmit: true, types: ['node'] },
      include: ['bin', 'jobs'],
    },
    null,
    2,
  )}\n`,
  'bin/app.ts': `import * as path from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { PacedJobs } from 'paced-jobs';

const app = new App();
const stack = new Stack(app, 'TeamStack');
const reports = new dynamodb.TableV2(stack, 'Reports', { partitionKey: { name: 'reportId', type: dynamodb.AttributeType.STRING } });
new PacedJobs(stack, 'Jobs', { jobs: { '${JOB}': {
  entry: path.join(__dirname, '..', 'jobs', '${JOB}', 'index.ts'),
  schedule: { cron: '0 4 * * ? *', timeZone: 'Europe/Berlin' },
  rateLimit: { starts: 600, intervalSeconds: 60 }, pageSize: 7,
  uses: { tables: { reports: { table: reports, access: 'readwrite' } } }, settings: { accounts: ${ACCOUNTS} },
} } });
`,
  [`jobs/${JOB}/index.ts`]: `// One usage report per account and business date, written to the reports table.
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { PutCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import * as z from 'zod/mini';
import { defineJob, documentClient, JobSettingsReader, type JobRuntimeSettings } from 'paced-jobs/job';

const resourceSchema = z.strictObject({ accountId: z.string() });
type Resource = z.infer<typeof resourceSchema>;

interface Deps {
  documents: DynamoDBDocumentClient;
  reportsTable: string;
  accounts: number;
}

function createDeps(settings: JobRuntimeSettings): Deps {
  const read = new JobSettingsReader(settings);
  const reportsTable = read.name('tables', 'reports');
  const accounts = read.integer('accounts', { min: 1, max: 10_000 });
  read.done();
  return { documents: documentClient(), reportsTable, accounts };
}

const accountId = (n: number) => \`account-\${String(n).padStart(4, '0')}\`;

export const job = defineJob<Resource, Deps>({
  name: '${JOB}',
  resourceSchema,
  createDeps,
  async discover(deps, { businessDate, cursor, pageSize }) {
    const from = cursor === undefined ? 1 : Number(cursor);
    const to = Math.min(deps.accounts, from + pageSize - 1);
    const operations = [];
    for (let n = from; n <= to; n++) operations.push({ operationId: \`${JOB}:\${accountId(n)}:\${businessDate}\`, resource: { accountId: accountId(n) } });
    return { operations, nextCursor: to < deps.accounts ? String(to + 1) : undefined };
  },
  async apply(deps, { operationId, businessDate, resource }) {
    try {
      await deps.documents.send(
        new PutCommand({
          TableName: deps.reportsTable,
          Item: { reportId: operationId, accountId: resource.accountId, businessDate, createdAt: new Date().toISOString() },
          ConditionExpression: 'attribute_not_exists(reportId)',
        }),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return { outcome: 'already-done' };
      throw error;
    }
    return { outcome: 'applied' };
  },
});
`,
};

