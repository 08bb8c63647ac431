// The provider API key never reaches a log line, a DLQ message or the ledger, even when the provider echoes it back.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient, resetClients } from '../../../adapters/clients';
import { createConsumer } from '../../../handlers/consumer';
import { createDeps, job, JOB_NAME } from '..';
import { unsettledPayment } from '../items';
import { LocalSecretsManager } from '../../../../local/secretsManager';
import type { RunningServer } from '../../../../local/servers';
import { startLocalAws, type LocalAws } from '../../../../test/support/aws';
import { captureOutput } from '../../../../test/support/capturedOutput';
import { startHttpStub, type HttpStub, type StubHandler } from '../../../../test/support/httpStub';
import { lambdaContext, sqsEvent, sqsRecord } from '../../../../test/support/lambdaEvents';
import {
  createIdempotencyTable,
  createLedgerTable,
  createLimiterTable,
  createQueue,
  drainQueue,
  STATE_TABLES,
  unpacedConsumerOptions,
} from '../../../../test/lambda/handlers/harness';
import { createTable, putAll, runtimeSettings } from '../../../../test/support/jobs';
import { TABLES } from './tables';

const DATE = '2026-11-28';
/** A fake key, distinctive so that any copy of it in the captured output is found. */
const API_KEY = 'sk_live_CORPUS9f3Kq2ZpX7vL0aTestKeyNeverLog';
const SECRET_NAME = 'paced-jobs/test/provider-api-key';
/** A key pasted with a line break in it: the HTTP client's error would quote the header holding it. */
const NEWLINE_KEY = 'sk_live_CORPUSNewlineHeadPart\nsk_live_CORPUSNewlineTailPart';
const NEWLINE_SECRET_NAME = 'paced-jobs/test/provider-api-key-newline';
/** Every form a leak of the newline key could take: as is, JSON-escaped (a log line), and each line of it. */
const NEWLINE_KEY_FORMS = [NEWLINE_KEY, JSON.stringify(NEWLINE_KEY).slice(1, -1), ...NEWLINE_KEY.split('\n')];

const echo =
  (status: number, headers: Record<string, string> = {}): StubHandler =>
  (req, res) => {
    // A careless provider: it repeats the credential it was sent in its error body and headers.
    res.writeHead(status, {
      'content-type': 'application/json',
      'x-echo-authorization': String(req.headers.authorization),
      ...headers,
    });
    res.end(
      JSON.stringify({
        error: 'denied',
        message: `invalid credentials: ${String(req.headers.authorization)} (key ${API_KEY})`,
        received: req.headers,
      }),
    );
  };

/** Each provider answer the consumer must survive without leaking the key, and what the record comes to. */
const SCENARIOS: { name: string; handler: StubHandler; failed: boolean; logged: string }[] = [
  { name: '401 echoing the key', handler: echo(401), failed: false, logged: 'provider answered 401: ' },
  { name: '403 echoing the key', handler: echo(403), failed: false, logged: 'provider answered 403: ' },
  { name: '400 echoing the key', handler: echo(400), failed: false, logged: 'provider answered 400: ' },
  { name: '500 echoing the key', handler: echo(500), failed: true, logged: 'provider answered 500: ' },
  { name: '502 echoing the key', handler: echo(502), failed: true, logged: 'provider answered 502: ' },
  {
    name: '429 echoing the key',
    handler: echo(429, { 'retry-after': '5' }),
    failed: false,
    logged: 'message deferred',
  },
  { name: '503 echoing the key', handler: echo(503), failed: false, logged: 'message deferred' },
  {
    name: '302 to a URL carrying the key',
    handler: echo(302, { location: `https://evil.example/?key=${API_KEY}` }),
    failed: false,
    logged: 'provider answered 302: ',
  },
  {
    name: '200 with a body that is not JSON and holds the key',
    handler: (_req, res) => res.writeHead(200).end(`<html>key=${API_KEY}</html>`),
    failed: true,
    logged: 'with a body that is not JSON',
  },
  {
    name: '200 with an unexpected JSON body holding the key',
    handler: (_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ apiKey: API_KEY, status: 42 })),
    failed: true,
    logged: 'with an unexpected body',
  },
  {
    name: 'a connection dropped mid-answer',
    handler: (_req, res) => res.socket?.destroy(),
    failed: true,
    logged: 'failed: fetch failed',
  },
  {
    name: '200 settled',
    handler: (req, res) => {
      const paymentId = decodeURIComponent(req.url.split('/')[3]);
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ paymentId, status: 'settled', providerReference: `prov-${paymentId}` }));
    },
    failed: false,
    logged: 'operation completed',
  },
];

describe('Function: createConsumer', () => {
  let aws: LocalAws;
  let stub: HttpStub;
  let secrets: RunningServer;
  let queueUrl: string;
  let dlqUrl: string;
  const savedEndpoint = process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER;
  const output: string[] = [];
  const outcomes: { name: string; failed: boolean }[] = [];
  let newlineFailed: boolean | undefined;
  let newlineRequests: number | undefined;
  const messageBody = (paymentId: string) =>
    JSON.stringify({
      version: 1,
      jobType: JOB_NAME,
      operationId: `reconcile:acme:${paymentId}:${DATE}`,
      batchId: `${JOB_NAME}:${DATE}:secret-logs`,
      businessDate: DATE,
      resource: { paymentId },
      enqueuedAt: new Date().toISOString(),
    });

  beforeAll(async () => {
    aws = await startLocalAws();
    const manager = new LocalSecretsManager();
    manager.add({
      name: SECRET_NAME,
      arn: `arn:aws:secretsmanager:us-east-1:000000000000:secret:${SECRET_NAME}-AbCdEf`,
      value: API_KEY,
    });
    manager.add({
      name: NEWLINE_SECRET_NAME,
      arn: `arn:aws:secretsmanager:us-east-1:000000000000:secret:${NEWLINE_SECRET_NAME}-AbCdEf`,
      value: NEWLINE_KEY,
    });
    secrets = await manager.start();
    process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER = secrets.endpoint;
    resetClients();
    stub = await startHttpStub();
    const raw = new DynamoDBClient({});
    await Promise.all([
      createIdempotencyTable(STATE_TABLES.idempotency),
      createLedgerTable(STATE_TABLES.ledger),
      createLimiterTable(STATE_TABLES.limiter),
      createTable(raw, TABLES.payments),
    ]);
    raw.destroy();
    [queueUrl, dlqUrl] = await Promise.all([createQueue('secret-logs'), createQueue('secret-logs-dlq')]);
    await putAll(documentClient(), TABLES.payments.name, [
      ...SCENARIOS.map((_, i) => unsettledPayment({ paymentId: `pay-${i}`, businessDate: DATE })),
      unsettledPayment({ paymentId: 'pay-nl', businessDate: DATE }),
    ]);

    const consumerWith = (secretName: string) =>
      createConsumer({
        job,
        // The real dependencies: the key is read from Secrets Manager (the local emulator) at call time.
        jobDeps: createDeps(
          runtimeSettings({
            jobName: JOB_NAME,
            tables: { payments: TABLES.payments.name },
            secrets: { apiKey: secretName },
            settings: { provider: 'acme', providerBaseUrl: stub.url, providerTimeoutMs: 2000 },
          }),
        ),
        ...unpacedConsumerOptions(queueUrl, dlqUrl, 'secret-logs'),
      });
    const handle = consumerWith(SECRET_NAME);

    // Everything the logger can say, debug included, so a leak at any level is caught.
    const captured = captureOutput();
    try {
      for (const [i, scenario] of SCENARIOS.entries()) {
        stub.handle(scenario.handler);
        const response = await handle(
          sqsEvent(sqsRecord(messageBody(`pay-${i}`), { messageId: `m-${i}` })),
          lambdaContext(),
        );
        outcomes.push({ name: scenario.name, failed: response.batchItemFailures.length > 0 });
      }
      // The newline key, on its last allowed receive, so a leak into the ledger's dead-letter entry would be found too.
      stub.handle(SCENARIOS[SCENARIOS.length - 1].handler);
      const requestsBefore = stub.requests.length;
      const response = await consumerWith(NEWLINE_SECRET_NAME)(
        sqsEvent(
          sqsRecord(messageBody('pay-nl'), {
            messageId: 'm-nl',
            attributes: { ...sqsRecord('').attributes, ApproximateReceiveCount: '5' },
          }),
        ),
        lambdaContext(),
      );
      newlineFailed = response.batchItemFailures.length > 0;
      newlineRequests = stub.requests.length - requestsBefore;
      // The metrics flush (EMF on stdout) is captured like any log line, so a key in a metric would be found too.
    } finally {
      captured.stop();
      output.push(...captured.chunks);
    }
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    if (savedEndpoint === undefined) delete process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER;
    else process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER = savedEndpoint;
    resetClients();
    await Promise.all([stub.close(), secrets.close()]);
    await aws.stop();
  });

  describe('Method: handler (provider API key hygiene)', () => {
    it('sent the key from Secrets Manager to the provider, so the paths below really held it', () => {
      expect(stub.requests.length).toBeGreaterThanOrEqual(SCENARIOS.length);
      expect(stub.requests.every((r) => r.headers.authorization === `Bearer ${API_KEY}`)).toBe(true);
    });

    it('reaches every error path the scenarios name, and settles each as the outcome rules say', () => {
      expect(outcomes).toEqual(SCENARIOS.map((s) => ({ name: s.name, failed: s.failed })));
      const text = output.join('');
      expect(SCENARIOS.filter((s) => !text.includes(s.logged)).map((s) => s.name)).toEqual([]);
    });

    it('never writes the key to stdout or stderr, at any log level', () => {
      const text = output.join('');
      expect(text.length).toBeGreaterThan(0);
      expect(text.includes(API_KEY)).toBe(false);
      expect(text).toContain('[redacted]');
    });

    it('never puts the key into a dead-lettered or deferred message, nor into the ledger or the idempotency records', async () => {
      const messages = [...(await drainQueue(dlqUrl)), ...(await drainQueue(queueUrl))];
      expect(messages.length).toBeGreaterThan(0);
      expect(JSON.stringify(messages).includes(API_KEY)).toBe(false);
      expect(NEWLINE_KEY_FORMS.filter((form) => JSON.stringify(messages).includes(form))).toEqual([]);
      for (const table of ['ledger', 'idempotency', TABLES.payments.name]) {
        const { Items = [] } = await documentClient().send(new ScanCommand({ TableName: table }));
        expect(Items.length).toBeGreaterThan(0);
        expect(JSON.stringify(Items).includes(API_KEY)).toBe(false);
      }
    });
  });

  describe('Method: handler (a provider API key holding a newline)', () => {
    it('refuses the key where it is read, naming the secret: the record fails for a retry and nothing is sent', () => {
      expect(newlineFailed).toBe(true);
      expect(newlineRequests).toBe(0);
      expect(output.join('')).toContain(
        `secret \\"${NEWLINE_SECRET_NAME}\\" is not a usable API key: it holds whitespace (a line break or a space, often a trailing newline)`,
      );
    });

    it('writes no form of the key to stdout or stderr', () => {
      const text = output.join('');
      expect(NEWLINE_KEY_FORMS.filter((form) => text.includes(form))).toEqual([]);
    });

    // The queues are drained, and checked for this key too, by the test above.
    it('puts no form of the key into the ledger or the idempotency records', async () => {
      const ledger = await documentClient().send(new ScanCommand({ TableName: 'ledger' }));
      // The record's last receive put its reason in the ledger's dead-letter entries: the refusal, not the key.
      expect(JSON.stringify(ledger.Items)).toContain(`secret \\"${NEWLINE_SECRET_NAME}\\" is not a usable API key`);
      const idempotency = await documentClient().send(new ScanCommand({ TableName: 'idempotency' }));
      const stored = JSON.stringify(ledger.Items) + JSON.stringify(idempotency.Items);
      expect(NEWLINE_KEY_FORMS.filter((form) => stored.includes(form))).toEqual([]);
    });
  });
});
