import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { idempotencyKeyPrefix, idempotencyRecordId } from '../../../lambda/core/idempotencyKey';
import { businessDatesIn, type OperationResult } from '../../../ops/commands/op';
import { lambdaContext } from '../../support/lambdaEvents';
import { CREDENTIALS, type OpsFixture, REGION, startOpsFixture } from '../fixture';

describe('Function: businessDatesIn', () => {
  it('finds the business date parts of an operation ID', () => {
    expect(businessDatesIn('reconcile:acme:p-1:2026-11-01')).toEqual(['2026-11-01']);
    expect(businessDatesIn('tenant-7:expired-sessions:2026-11-01')).toEqual(['2026-11-01']);
  });

  it('finds none in a timestamp or an unreal date', () => {
    expect(businessDatesIn('stale-upload:u-1:2026-11-01T00:00:00.000Z')).toEqual([]);
    expect(businessDatesIn('reconcile:acme:p-1:2026-02-30')).toEqual([]);
  });
});

describe('Function: operation (ops op)', () => {
  let f: OpsFixture;
  let ddb: DynamoDBClient;
  const applied = 'reconcile:acme:p-1:2026-11-01';
  const rejected = 'reconcile:acme:p-2:2026-11-01';

  beforeAll(async () => {
    f = await startOpsFixture(['alpha', 'beta']);
    ddb = new DynamoDBClient({ endpoint: f.aws.dynamodb.endpoint, region: REGION, credentials: CREDENTIALS });
    // The record the consumer writes: Powertools with the consumer's key settings (operationId in the body, job prefix).
    const config = new IdempotencyConfig({ eventKeyJmesPath: 'operationId', expiresAfterSeconds: 3600 });
    config.registerLambdaContext(lambdaContext());
    const apply = makeIdempotent(
      async (_message: { operationId: string }) => ({ outcome: 'applied', providerStatus: 204 }),
      {
        persistenceStore: new DynamoDBPersistenceLayer({ tableName: f.tables.idempotency, awsSdkV3Client: ddb }),
        config,
        keyPrefix: idempotencyKeyPrefix('alpha'),
      },
    );
    await apply({ operationId: applied });
    const ledger = new DynamoLedger({ tableName: f.tables.ledger, client: f.dynamo });
    await ledger.addToBatch(
      'alpha',
      'alpha:2026-11-01:20261101T010000Z',
      { discovered: 2, published: 2, completed: 2 },
      { businessDate: '2026-11-01' },
    );
    await ledger.addToBatch(
      'alpha',
      'alpha:2026-11-02:20261102T010000Z',
      { discovered: 1 },
      { businessDate: '2026-11-02' },
    );
    await ledger.recordRejection({
      job: 'beta',
      messageId: 'm-1',
      reasons: ['resource.amount: expected number'],
      body: '{"operationId":"x"}',
      operationId: rejected,
      batchId: 'beta:2026-11-01:manual-1',
    });
    await ledger.recordRejection({
      job: 'beta',
      messageId: 'm-2',
      reasons: ['other'],
      body: '{}',
      operationId: 'reconcile:acme:p-9:2026-11-01',
    });
  });
  afterAll(async () => {
    ddb.destroy();
    await f.stop();
  });

  it('shows the idempotency record and the batches of its business date', async () => {
    const out = await f.run(['op', applied, '--json']);

    expect(out.code).toBe(0);
    const result = out.json<OperationResult>();
    expect(result).toMatchObject({ ok: true, command: 'op', operationId: applied, found: true });
    expect(result.jobs).toHaveLength(1);
    const [alpha] = result.jobs;
    expect(alpha.job).toBe('alpha');
    expect(alpha.idempotencyRecord).toMatchObject({
      id: idempotencyRecordId('alpha', applied),
      status: 'COMPLETED',
      expired: false,
      result: { outcome: 'applied', providerStatus: 204 },
    });
    const expiresIn = Date.parse(alpha.idempotencyRecord!.expiresAt!) - Date.now();
    expect(expiresIn).toBeGreaterThan(3500_000);
    // Powertools stores whole seconds, rounded either way.
    expect(expiresIn).toBeLessThanOrEqual(3601_000);
    expect(alpha.rejections).toEqual([]);
    expect(alpha.batches.map((b) => [b.batchId, b.reconciles])).toEqual([['alpha:2026-11-01:20261101T010000Z', true]]);
  });

  it('shows the rejection of an operation that never got a record', async () => {
    const out = await f.run(['op', rejected, '--json']);

    const result = out.json<OperationResult>();
    expect(result.found).toBe(true);
    expect(result.jobs).toHaveLength(1);
    expect(result.jobs[0]).toMatchObject({
      job: 'beta',
      idempotencyRecord: null,
      rejections: [
        {
          messageId: 'm-1',
          operationId: rejected,
          batchId: 'beta:2026-11-01:manual-1',
          reasons: ['resource.amount: expected number'],
          body: '{"operationId":"x"}',
          truncated: false,
        },
      ],
      batches: [],
    });
  });

  it('says so when no job knows the operation', async () => {
    const json = await f.run(['op', 'reconcile:acme:nope:2026-11-05', '--json']);
    const text = await f.run(['op', 'reconcile:acme:nope:2026-11-05']);

    expect(json.code).toBe(0);
    expect(json.json()).toEqual({
      ok: true,
      command: 'op',
      operationId: 'reconcile:acme:nope:2026-11-05',
      found: false,
      jobs: [],
    });
    expect(text.stdout).toBe(
      'operation reconcile:acme:nope:2026-11-05: no idempotency record or rejection in any job (never consumed, still queued, or its record expired)\n',
    );
  });

  it('prints the record as a table by default', async () => {
    const out = await f.run(['op', applied, '--job', 'alpha']);

    expect(out.stdout).toMatch(/^operation reconcile:acme:p-1:2026-11-01\n/);
    expect(out.stdout).toContain('COMPLETED');
    expect(out.stdout).toContain('{"outcome":"applied","providerStatus":204}');
    expect(out.stdout).toContain('Batches of its business date');
  });
});
