import { SecretError } from '../../../lambda/adapters/secrets';
import { type HttpStub, startHttpStub } from '../../support/httpStub';
import { loggedError } from '../../support/capturedOutput';

// A stand-in for Secrets Manager's JSON protocol, reached the way production code reaches the real one: through
// AWS_ENDPOINT_URL_SECRETS_MANAGER, so the Powertools call path is the one under test.
const VARS = [
  'AWS_ENDPOINT_URL_SECRETS_MANAGER',
  'AWS_REGION',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_MAX_ATTEMPTS',
];
const SECRETS: Record<string, { SecretString?: string; SecretBinary?: string }> = {
  'app/api-key': { SecretString: 'k-123' },
  'app/binary': { SecretBinary: Buffer.from([1, 2, 3]).toString('base64') },
  'app/good-key': { SecretString: 'sk_live_GoodKey0123' },
  'app/newline-key': { SecretString: 'sk_live_NewlineKeyHead\nsk_live_NewlineKeyTail' },
  'app/trailing-newline': { SecretString: 'sk_live_TrailingNewline\n' },
  'app/space-key': { SecretString: 'sk_live_Space Key' },
  'app/unicode-key': { SecretString: 'sk_live_caf\u00e9Key' },
  'app/short-key': { SecretString: 'k-123' },
  'app/long-key': { SecretString: 'k'.repeat(4097) },
};
/** A secret whose GetSecretValue answer is not JSON but the bare value, as a broken proxy might send it. */
const GARBLED = 'app/garbled';
const GARBLED_VALUE = 'sk_live_GarbledAnswerValue';

describe('Function: secretStringGetter', () => {
  let stub: HttpStub;
  let saved: Record<string, string | undefined>;
  let secretStringGetter: typeof import('../../../lambda/adapters/secrets').secretStringGetter;
  let apiKeyGetter: typeof import('../../../lambda/adapters/secrets').apiKeyGetter;

  beforeAll(async () => {
    stub = await startHttpStub();
    stub.handle((req, res) => {
      const { SecretId } = JSON.parse(req.body) as { SecretId: string };
      if (SecretId === GARBLED) {
        res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' }).end(GARBLED_VALUE);
        return;
      }
      const secret = SECRETS[SecretId];
      if (secret === undefined) {
        res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' }).end(
          JSON.stringify({
            __type: 'ResourceNotFoundException',
            message: "Secrets Manager can't find the specified secret.",
          }),
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' }).end(
        JSON.stringify({
          ARN: `arn:aws:secretsmanager:us-east-1:000000000000:secret:${SecretId}-AbCdEf`,
          Name: SecretId,
          VersionId: 'v1',
          ...secret,
        }),
      );
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
    ({ secretStringGetter, apiKeyGetter } = await import('../../../lambda/adapters/secrets'));
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
    // Secrets Manager's own refusal is about the request: its type and message are kept, nothing else of the SDK's error.
    const cause = (error as SecretError).cause as Error;
    expect({ name: cause.name, message: cause.message, cause: cause.cause }).toEqual({
      name: 'ResourceNotFoundException',
      message: "Secrets Manager can't find the specified secret.",
      cause: undefined,
    });
  });

  it('keeps only the type of a read failure that quotes the answer, so the value reaches no log line', async () => {
    const error = (await secretStringGetter(GARBLED)().catch((e: unknown) => e)) as SecretError;
    expect(error).toBeInstanceOf(SecretError);
    expect(error.message).toBe(`could not read secret "${GARBLED}"`);
    const cause = error.cause as Error;
    expect({ name: cause.name, message: cause.message }).toEqual({
      name: 'SyntaxError',
      message: 'message withheld: it may quote the response, which holds the value',
    });
    const logged = loggedError(error);
    expect(logged).toContain('message withheld');
    expect(logged).not.toContain(GARBLED_VALUE);
  });

  it('throws SecretError when the secret holds binary data', async () => {
    await expect(secretStringGetter('app/binary')()).rejects.toThrow('secret "app/binary" holds no string value');
  });

  describe('Function: apiKeyGetter', () => {
    it('returns a key of printable ASCII without whitespace', async () => {
      await expect(apiKeyGetter('app/good-key')()).resolves.toBe('sk_live_GoodKey0123');
    });

    it.each([
      ['app/newline-key', 'it holds whitespace (a line break or a space, often a trailing newline)'],
      ['app/trailing-newline', 'it holds whitespace (a line break or a space, often a trailing newline)'],
      ['app/space-key', 'it holds whitespace (a line break or a space, often a trailing newline)'],
      ['app/unicode-key', 'it holds a character that is not printable ASCII'],
      ['app/short-key', 'it is shorter than 8 characters'],
      ['app/long-key', 'it is longer than 4096 characters'],
    ])('refuses %s, naming the secret and the problem, never the value', async (secretId, problem) => {
      const error = (await apiKeyGetter(secretId)().catch((e: unknown) => e)) as SecretError;
      expect(error).toBeInstanceOf(SecretError);
      expect(error.message).toBe(`secret "${secretId}" is not a usable API key: ${problem}`);
      expect(error.secretId).toBe(secretId);
      expect(error.cause).toBeUndefined();
      const value = SECRETS[secretId].SecretString as string;
      const logged = loggedError(error);
      expect(logged).toContain(`secret \\"${secretId}\\" is not a usable API key`);
      for (const part of value.split(/\s/).filter((p) => p.length >= 5)) expect(logged).not.toContain(part);
    });
  });
});
