// An API key pasted with a line break, on a local run of the engine's synthesized test app (test/support/testApp.ts):
// the consumer of the job that reads it (apiKeyGetter, the job API's) refuses it where it reads it, naming the secret,
// and no form of the key reaches the functions' output (what CloudWatch Logs would hold), the DLQ, the ledger or the
// idempotency records. The queue is retimed so that the records reach the DLQ in seconds: a visibility timeout of 6 s
// and two receives, not the deployed minutes.
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { jobViews, previewPlan } from '../../local/jobs';
import type { LocalSession } from '../../local/session';
import type { CloudFormationTemplate } from '../../local/template';
import { waitFor } from '../../local/waitFor';
import { openTestAppSession, RECORD_WRITER } from '../support/testApp';

/** Reads its API key (the app's one secret) before each write. */
const JOB = RECORD_WRITER;
const ITEMS = 2;
/** Distinctive halves, so that a copy of either line of the key is found. */
const KEY = 'sk_live_LOCALNewlineHeadPart\nsk_live_LOCALNewlineTailPart';
const KEY_FORMS = [KEY, JSON.stringify(KEY).slice(1, -1), ...KEY.split('\n')];

/** The stack's API key holds a line break, and the job's queue hands a failed record to its DLQ in seconds. */
function newlineKeyFastDlq(template: CloudFormationTemplate): CloudFormationTemplate {
  const secrets = Object.values(template.Resources).filter((r) => r.Type === 'AWS::SecretsManager::Secret');
  if (secrets.length !== 1 || !secrets[0].Properties)
    throw new Error(`the test app should create one secret, the API key (it has ${secrets.length})`);
  delete secrets[0].Properties.GenerateSecretString;
  secrets[0].Properties.SecretString = KEY;
  const consumer = jobViews(previewPlan(template, 'preview')).get(JOB)?.consumer?.logicalId;
  const mapping = Object.values(template.Resources).find(
    (r) =>
      r.Type === 'AWS::Lambda::EventSourceMapping' &&
      (r.Properties?.FunctionName as { Ref?: string } | undefined)?.Ref === consumer,
  );
  const queueId = ((mapping?.Properties?.EventSourceArn as { 'Fn::GetAtt'?: string[] } | undefined)?.['Fn::GetAtt'] ??
    [])[0];
  const queue = queueId ? template.Resources[queueId] : undefined;
  const fn = consumer ? template.Resources[consumer] : undefined;
  if (!queue?.Properties || !fn?.Properties) throw new Error(`the test app has no work queue and consumer for ${JOB}`);
  fn.Properties.Timeout = 5;
  queue.Properties.VisibilityTimeout = 6;
  queue.Properties.RedrivePolicy = { ...(queue.Properties.RedrivePolicy as object), maxReceiveCount: 2 };
  return template;
}

describe('An API key holding a newline, on a local run of the job reading it', () => {
  let session: LocalSession;
  const output: string[] = [];
  let secretName: string;

  beforeAll(async () => {
    // As many environments as items: none of the few-second invocations waits for a cold start.
    session = await openTestAppSession({
      template: newlineKeyFastDlq,
      log: (source, line) => output.push(`[${source}] ${line}`),
      prewarm: ITEMS,
    });
    secretName = session.stack.secrets.list()[0].name;
    session.startConsumers();
    const job = session.job(JOB);
    const businessDate = session.businessDateFor(JOB);
    await session.seed(JOB, ITEMS, businessDate);
    await session.fire(JOB, { scheduledTime: new Date(), businessDate });
    await waitFor(`the ${ITEMS} items in the DLQ`, async () => (await session.depth(job.dlqUrl)).total >= ITEMS, {
      timeoutMs: 90_000,
      intervalMs: 250,
    });
  }, 150_000);

  afterAll(async () => {
    await session?.close();
  });

  it('refuses the key where it is read, naming the secret and the problem', () => {
    const text = output.join('\n');
    expect(text).toContain(
      `secret \\"${secretName}\\" is not a usable API key: it holds whitespace (a line break or a space, often a trailing newline)`,
    );
  });

  it("writes no form of the key to any function's output", () => {
    const text = output.join('\n');
    expect(KEY_FORMS.filter((form) => text.includes(form))).toEqual([]);
  });

  it('puts no form of the key into the DLQ, the ledger or the idempotency records', async () => {
    const job = session.job(JOB);
    const { Messages = [] } = await session.sqs().send(
      new ReceiveMessageCommand({
        QueueUrl: job.dlqUrl,
        MaxNumberOfMessages: 10,
        MessageAttributeNames: ['All'],
        WaitTimeSeconds: 0,
      }),
    );
    expect(Messages.length).toBeGreaterThan(0);
    const env = job.consumer?.environment ?? {};
    const tables = [env.LEDGER_TABLE_NAME, env.IDEMPOTENCY_TABLE_NAME];
    expect(tables.every((t) => typeof t === 'string')).toBe(true);
    const items = await Promise.all(
      tables.map(async (t) => (await session.documents().send(new ScanCommand({ TableName: t }))).Items ?? []),
    );
    const stored = JSON.stringify(Messages) + JSON.stringify(items);
    expect(KEY_FORMS.filter((form) => stored.includes(form))).toEqual([]);
  });
});
