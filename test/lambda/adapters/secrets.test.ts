import { SecretError } from '../../../lambda/adapters/secrets';
import { HttpStub, startHttpStub } from '../../support/httpStub';

// A stand-in for Secrets Manager's JSON protocol, reached the way production code reaches the real one: through
// AWS_ENDPOINT_URL_SECRETS_MANAGER, so the Powertools call path is the one under test.
const VARS = ['AWS_ENDPOINT_URL_SECRETS_MANAGER', 'AWS_REGION', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_MAX_ATTEMPTS'];
const SECRETS: Record<string, { SecretString?: string; SecretBinary?: string }> = {
  'app/api-key': { SecretString: 'k-123' },
  'app/binary': { SecretBinary: Buffer.from([1, 2, 3]).toString('base64') },
};

describe('Function: secretStringGetter', () => {
  let stub: HttpStub;
  let saved: Record<string, string | undefined>;
  let secretStringGetter: typeof import('../../../lambda/adapters/secrets').secretStringGetter;

  beforeAll(async () => {
    stub = await startHttpStub();
    stub.handle((req, res) => {
      const { SecretId } = JSON.parse(req.body) as { SecretId: string };
      const secret = SECRETS[SecretId];
      if (secret === undefined) {
        res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' })
          .end(JSON.stringify({ __type: 'ResourceNotFoundException', message: "Secrets Manager can't find the specified secret." }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' })
        .end(JSON.stringify({ ARN: `arn:aws:secretsmanager:us-east-1:000000000000:secret:${SecretId}-AbCdEf`, Name: SecretId, VersionId: 'v1', ...secret }));
    });
    saved = Object.fromEntries(VARS.map((v) => [v, process.env[v]]));
    Object.assign(process.env, {
      AWS_ENDPOINT_URL_SECRETS_MANAGER: stub.url,
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      AWS_MAX_ATTEMPTS: '1',
    });
    // Imported after the environment is set: Powertools builds its Secrets Manager client on first use.
    ({ secretStringGetter } = await import('../../../lambda/adapters/secrets'));
  });
  afterAll(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await stub.close();
  });
  beforeEach(() => {
    stub.requests.length = 0;
  });

  it('reads the secret string through Secrets Manager and serves repeats from the cache', async () => {
    const getKey = secretStringGetter('app/api-key', { maxAgeSeconds: 60 });
    await expect(getKey()).resolves.toBe('k-123');
    await expect(getKey()).resolves.toBe('k-123');
    expect(stub.requests).toHaveLength(1);
    expect(stub.requests[0].headers['x-amz-target']).toBe('secretsmanager.GetSecretValue');
  });

  it('fetches nothing until it is called', () => {
    secretStringGetter('app/never-read');
    expect(stub.requests).toHaveLength(0);
  });

  it('throws SecretError naming the secret when it cannot be read', async () => {
    const getKey = secretStringGetter('app/missing');
    const error = await getKey().catch((e: unknown) => e as SecretError);
    expect(error).toBeInstanceOf(SecretError);
    expect((error as SecretError).message).toBe('could not read secret "app/missing"');
    expect((error as SecretError).secretId).toBe('app/missing');
    expect((error as SecretError).cause).toBeDefined();
  });

  it('throws SecretError when the secret holds binary data', async () => {
    await expect(secretStringGetter('app/binary')()).rejects.toThrow('secret "app/binary" holds no string value');
  });
});
