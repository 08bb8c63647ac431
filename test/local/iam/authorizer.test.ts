// The authorizer decides as AWS would: identity policies, resource policies (enforceSSL's deny, same-account grants,
// KMS key policies, trust policies), explicit denies and conditions, with AWS's own denial messages.
jest.mock('@cloud-copilot/iam-simulate', () => {
  const actual = jest.requireActual('@cloud-copilot/iam-simulate');
  return { ...actual, runSimulation: jest.fn(actual.runSimulation) };
});
import { runSimulation } from '@cloud-copilot/iam-simulate';
import { Authorizer, type Denial } from '../../../local/iam/authorizer';
import { ADMIN, rolePrincipal } from '../../../local/iam/credentials';
import type { PlannedIam } from '../../../local/plan';
import { ACCOUNT, enforceSsl, functionArn, keyArn, queueArn, role, roleArn, tableArn } from './fixtures';

const TABLE = tableArn('T');
const QUEUE = queueArn('q');

const iam: PlannedIam = {
  roles: [
    role('reader', [
      { Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:Query'], Resource: [TABLE, `${TABLE}/index/*`] },
    ]),
    role('sender', [
      { Effect: 'Allow', Action: ['sqs:SendMessage', 'sqs:GetQueueAttributes'], Resource: QUEUE },
      { Effect: 'Allow', Action: 'dynamodb:*', Resource: TABLE },
      { Effect: 'Deny', Action: 'dynamodb:DeleteItem', Resource: '*' },
      { Effect: 'Allow', Action: ['kms:GenerateDataKey', 'kms:Decrypt'], Resource: '*' },
    ]),
    // No identity policy at all: only resource policies can let it in.
    role('bare', []),
    role('managed', [], {
      externalManagedPolicyArns: ['arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole'],
    }),
    role(
      'scheduled',
      [
        {
          Effect: 'Allow',
          Action: 'lambda:InvokeFunction',
          Resource: [functionArn('producer'), `${functionArn('producer')}:*`],
        },
      ],
      {
        trustPolicy: {
          Version: '2012-10-17',
          Statement: [
            {
              Effect: 'Allow',
              Principal: { Service: 'scheduler.amazonaws.com' },
              Action: 'sts:AssumeRole',
              Condition: { StringEquals: { 'aws:SourceAccount': ACCOUNT } },
            },
          ],
        },
      },
    ),
  ],
  resourcePolicies: [
    {
      logicalIds: ['QueuePolicy'],
      service: 'sqs',
      resourceArn: QUEUE,
      document: {
        Version: '2012-10-17',
        Statement: [
          enforceSsl('sqs', QUEUE),
          { Effect: 'Allow', Principal: { AWS: roleArn('bare') }, Action: 'sqs:ReceiveMessage', Resource: QUEUE },
        ],
      },
    },
    {
      logicalIds: ['TrustingKey'],
      service: 'kms',
      resourceArn: keyArn('trusting'),
      document: {
        Version: '2012-10-17',
        Statement: [
          { Effect: 'Allow', Principal: { AWS: `arn:aws:iam::${ACCOUNT}:root` }, Action: 'kms:*', Resource: '*' },
        ],
      },
    },
    {
      logicalIds: ['ClosedKey'],
      service: 'kms',
      resourceArn: keyArn('closed'),
      document: {
        Version: '2012-10-17',
        Statement: [
          { Effect: 'Allow', Principal: { Service: 'cloudwatch.amazonaws.com' }, Action: 'kms:Decrypt', Resource: '*' },
        ],
      },
    },
    {
      logicalIds: ['ProducerPermission'],
      service: 'lambda',
      resourceArn: functionArn('producer'),
      document: {
        Version: '2012-10-17',
        Statement: [
          {
            Effect: 'Allow',
            Principal: { Service: 'events.amazonaws.com' },
            Action: 'lambda:InvokeFunction',
            Resource: functionArn('producer'),
            Condition: { ArnLike: { 'aws:SourceArn': `arn:aws:events:us-east-1:${ACCOUNT}:rule/nightly-*` } },
          },
        ],
      },
    },
  ],
};

const reader = rolePrincipal(roleArn('reader'), 'reader-fn');
const sender = rolePrincipal(roleArn('sender'), 'sender-fn');
const bare = rolePrincipal(roleArn('bare'), 'bare-fn');

describe('Class: Authorizer', () => {
  let authorizer: Authorizer;
  let seen: Denial[];

  beforeEach(() => {
    seen = [];
    authorizer = new Authorizer({
      iam,
      accountId: ACCOUNT,
      region: 'us-east-1',
      onDenial: (d) => seen.push(d),
      now: () => new Date('2026-01-02T03:04:05Z'),
    });
  });

  describe('Method: authorize', () => {
    it('allows what an identity policy allows, and denies the rest in AWS words, recording who was denied', async () => {
      expect(await authorizer.authorize({ principal: reader, action: 'dynamodb:GetItem', resource: TABLE })).toEqual({
        allowed: true,
        wouldDeny: false,
      });
      expect(
        await authorizer.authorize({ principal: reader, action: 'dynamodb:Query', resource: `${TABLE}/index/byDate` }),
      ).toMatchObject({ allowed: true });

      const denied = await authorizer.authorize({ principal: reader, action: 'dynamodb:PutItem', resource: TABLE });
      const message =
        `User: arn:aws:sts::${ACCOUNT}:assumed-role/reader/reader-fn is not authorized to perform: dynamodb:PutItem on resource: ${TABLE} ` +
        'because no identity-based policy allows the dynamodb:PutItem action';
      expect(denied).toEqual({ allowed: false, wouldDeny: true, reason: 'no-identity-allow', message });
      expect(authorizer.denials).toEqual([
        {
          at: Date.parse('2026-01-02T03:04:05Z'),
          principalArn: `arn:aws:sts::${ACCOUNT}:assumed-role/reader/reader-fn`,
          roleArn: roleArn('reader'),
          sessionName: 'reader-fn',
          action: 'dynamodb:PutItem',
          resource: TABLE,
          reason: 'no-identity-allow',
          message,
          enforced: true,
        },
      ]);
      expect(seen).toEqual(authorizer.denials);
      expect(authorizer.denialCount).toBe(1);
    });

    it('names an explicit deny in an identity-based policy, which wins over its own allow', async () => {
      const decision = await authorizer.authorize({
        principal: sender,
        action: 'dynamodb:DeleteItem',
        resource: TABLE,
      });
      expect(decision).toMatchObject({ allowed: false, reason: 'explicit-deny-identity' });
      expect(decision.message).toBe(
        `User: arn:aws:sts::${ACCOUNT}:assumed-role/sender/sender-fn is not authorized to perform: dynamodb:DeleteItem on resource: ${TABLE} with an explicit deny in an identity-based policy`,
      );
    });

    it("lets enforceSSL's deny pass a TLS request (a function's call) and fire on a plain-HTTP one", async () => {
      expect(
        await authorizer.authorize({ principal: sender, action: 'sqs:SendMessage', resource: QUEUE }),
      ).toMatchObject({ allowed: true });
      const plain = await authorizer.authorize({
        principal: sender,
        action: 'sqs:SendMessage',
        resource: QUEUE,
        secureTransport: false,
      });
      expect(plain).toMatchObject({ allowed: false, reason: 'explicit-deny-resource' });
      expect(plain.message).toBe(
        `User: arn:aws:sts::${ACCOUNT}:assumed-role/sender/sender-fn is not authorized to perform: sqs:SendMessage on resource: ${QUEUE} with an explicit deny in a resource-based policy`,
      );
    });

    it('lets a same-account resource policy grant a role with no identity policy, and nothing more', async () => {
      expect(
        await authorizer.authorize({ principal: bare, action: 'sqs:ReceiveMessage', resource: QUEUE }),
      ).toMatchObject({ allowed: true });
      expect(await authorizer.authorize({ principal: bare, action: 'sqs:SendMessage', resource: QUEUE })).toMatchObject(
        { allowed: false, reason: 'no-identity-allow' },
      );
    });

    it('requires a KMS key policy to trust the account before identity policies count', async () => {
      expect(
        await authorizer.authorize({ principal: sender, action: 'kms:GenerateDataKey', resource: keyArn('trusting') }),
      ).toMatchObject({ allowed: true });
      const closed = await authorizer.authorize({
        principal: sender,
        action: 'kms:GenerateDataKey',
        resource: keyArn('closed'),
      });
      expect(closed).toMatchObject({ allowed: false, reason: 'no-resource-allow' });
      expect(closed.message).toMatch(/because no resource-based policy allows the kms:GenerateDataKey action$/);
    });

    it("decides a service principal on the resource's policy and its conditions (ArnLike aws:SourceArn, StringEquals aws:SourceAccount)", async () => {
      const events = { kind: 'service' as const, service: 'events.amazonaws.com' };
      const nightly = {
        'aws:SourceArn': `arn:aws:events:us-east-1:${ACCOUNT}:rule/nightly-payments`,
        'aws:SourceAccount': ACCOUNT,
      };
      expect(
        await authorizer.authorize({
          principal: events,
          action: 'lambda:InvokeFunction',
          resource: functionArn('producer'),
          context: nightly,
        }),
      ).toMatchObject({ allowed: true });
      const other = { ...nightly, 'aws:SourceArn': `arn:aws:events:us-east-1:${ACCOUNT}:rule/hourly` };
      expect(
        await authorizer.authorize({
          principal: events,
          action: 'lambda:InvokeFunction',
          resource: functionArn('producer'),
          context: other,
        }),
      ).toMatchObject({
        allowed: false,
        reason: 'no-resource-allow',
      });

      // A role's trust policy is the resource policy of sts:AssumeRole on it.
      const scheduler = { kind: 'service' as const, service: 'scheduler.amazonaws.com' };
      expect(
        await authorizer.authorize({
          principal: scheduler,
          action: 'sts:AssumeRole',
          resource: roleArn('scheduled'),
          context: { 'aws:SourceAccount': ACCOUNT },
        }),
      ).toMatchObject({
        allowed: true,
      });
      expect(
        await authorizer.authorize({
          principal: scheduler,
          action: 'sts:AssumeRole',
          resource: roleArn('scheduled'),
          context: { 'aws:SourceAccount': '111111111111' },
        }),
      ).toMatchObject({
        allowed: false,
      });
      expect(
        await authorizer.authorize({
          principal: events,
          action: 'sts:AssumeRole',
          resource: roleArn('scheduled'),
          context: { 'aws:SourceAccount': ACCOUNT },
        }),
      ).toMatchObject({ allowed: false });
    });

    it('allows the administrator everything, recording nothing', async () => {
      expect(
        await authorizer.authorize({
          principal: ADMIN,
          action: 'dynamodb:DeleteTable',
          resource: TABLE,
          secureTransport: false,
        }),
      ).toEqual({ allowed: true, wouldDeny: false });
      expect(authorizer.denialCount).toBe(0);
    });

    it("says when a role's AWS managed policies could not be taken into account", async () => {
      const decision = await authorizer.authorize({
        principal: rolePrincipal(roleArn('managed'), 'fn'),
        action: 'logs:CreateLogGroup',
        resource: `arn:aws:logs:us-east-1:${ACCOUNT}:log-group:x`,
      });
      expect(decision.note).toBe(
        "the role's AWS managed policies (arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole) are not known locally and grant nothing here",
      );
      expect(authorizer.denials[0].note).toBe(decision.note);
    });

    it('denies, naming the evaluator, what it cannot evaluate (a resource of the wrong type for the action)', async () => {
      const decision = await authorizer.authorize({ principal: sender, action: 'sqs:SendMessage', resource: TABLE });
      expect(decision).toMatchObject({ allowed: false, reason: 'not-evaluable' });
      expect(decision.message).toMatch(
        /because the local IAM evaluator could not evaluate the request: no\.resource\.types$/,
      );
    });

    it('evaluates each distinct request once, and a repeated one from its cache, still recording each denial', async () => {
      const calls = (runSimulation as jest.Mock).mock.calls.length;
      for (let i = 0; i < 3; i++) {
        await authorizer.authorize({ principal: reader, action: 'dynamodb:GetItem', resource: TABLE });
        await authorizer.authorize({ principal: reader, action: 'dynamodb:PutItem', resource: TABLE });
      }
      expect((runSimulation as jest.Mock).mock.calls.length - calls).toBe(2);
      expect(authorizer.denialCount).toBe(3);
      // The transport is part of the request: a plain-HTTP one is evaluated on its own.
      await authorizer.authorize({
        principal: reader,
        action: 'dynamodb:GetItem',
        resource: TABLE,
        secureTransport: false,
      });
      expect((runSimulation as jest.Mock).mock.calls.length - calls).toBe(3);
    });

    it('keeps only the most recent denials, counting all', async () => {
      const small = new Authorizer({ iam, accountId: ACCOUNT, region: 'us-east-1', maxDenials: 2 });
      for (const action of ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'])
        await small.authorize({ principal: reader, action, resource: TABLE });
      expect(small.denials.map((d) => d.action)).toEqual(['dynamodb:UpdateItem', 'dynamodb:DeleteItem']);
      expect(small.denialCount).toBe(3);
    });

    it('evaluates a policy that reads the clock at the time of each request', async () => {
      let now = new Date('2026-01-01T00:00:00Z');
      const timed: PlannedIam = {
        roles: [
          role('timed', [
            {
              Effect: 'Allow',
              Action: 'dynamodb:GetItem',
              Resource: TABLE,
              Condition: { DateLessThan: { 'aws:CurrentTime': '2026-06-01T00:00:00Z' } },
            },
          ]),
        ],
        resourcePolicies: [],
      };
      const clocked = new Authorizer({ iam: timed, accountId: ACCOUNT, region: 'us-east-1', now: () => now });
      const principal = rolePrincipal(roleArn('timed'), 'fn');
      expect(await clocked.authorize({ principal, action: 'dynamodb:GetItem', resource: TABLE })).toMatchObject({
        allowed: true,
      });
      now = new Date('2026-07-01T00:00:00Z');
      expect(await clocked.authorize({ principal, action: 'dynamodb:GetItem', resource: TABLE })).toMatchObject({
        allowed: false,
      });
    });
  });

  describe('S3 objects', () => {
    const BUCKET = 'arn:aws:s3:::uploads';
    const objects: PlannedIam = {
      roles: [
        role('cleaner', [
          { Effect: 'Allow', Action: ['s3:DeleteObject', 's3:GetObject'], Resource: `${BUCKET}/stale/*` },
          { Effect: 'Deny', Action: 's3:DeleteObject', Resource: `${BUCKET}/stale/keep-?` },
        ]),
        role('own', [{ Effect: 'Allow', Action: 's3:DeleteObject', Resource: `${BUCKET}/\${aws:userid}/*` }]),
      ],
      resourcePolicies: [
        {
          logicalIds: ['UploadsPolicy'],
          service: 's3',
          resourceArn: BUCKET,
          document: { Version: '2012-10-17', Statement: [enforceSsl('s3', [BUCKET, `${BUCKET}/*`])] },
        },
      ],
    };
    const cleaner = rolePrincipal(roleArn('cleaner'), 'cleaner-fn');
    const simulations = () => (runSimulation as jest.Mock).mock.calls.length;

    it('decides objects that match the same policy patterns once, and names each denied object in its own message', async () => {
      const authorizer = new Authorizer({ iam: objects, accountId: ACCOUNT, region: 'us-east-1' });
      const before = simulations();
      for (let i = 0; i < 5; i++) {
        expect(
          await authorizer.authorize({
            principal: cleaner,
            action: 's3:DeleteObject',
            resource: `${BUCKET}/stale/upload-${i}`,
          }),
        ).toEqual({ allowed: true, wouldDeny: false });
      }
      expect(simulations() - before).toBe(1);
      // Outside the allowed prefix, matched by the deny, or over plain HTTP: each a class (and a decision) of its own.
      const outside = await authorizer.authorize({
        principal: cleaner,
        action: 's3:DeleteObject',
        resource: `${BUCKET}/fresh/a`,
      });
      const outsideToo = await authorizer.authorize({
        principal: cleaner,
        action: 's3:DeleteObject',
        resource: `${BUCKET}/fresh/b`,
      });
      expect(outside).toMatchObject({ allowed: false, reason: 'no-identity-allow' });
      expect(outside.message).toBe(
        `User: ${cleaner.assumedRoleArn} is not authorized to perform: s3:DeleteObject on resource: ${BUCKET}/fresh/a because no identity-based policy allows the s3:DeleteObject action`,
      );
      expect(outsideToo.message).toContain(`on resource: ${BUCKET}/fresh/b because`);
      expect(
        await authorizer.authorize({
          principal: cleaner,
          action: 's3:DeleteObject',
          resource: `${BUCKET}/stale/keep-1`,
        }),
      ).toMatchObject({ allowed: false, reason: 'explicit-deny-identity' });
      expect(
        await authorizer.authorize({
          principal: cleaner,
          action: 's3:DeleteObject',
          resource: `${BUCKET}/stale/keep-10`,
        }),
      ).toMatchObject({ allowed: true });
      expect(
        await authorizer.authorize({
          principal: cleaner,
          action: 's3:DeleteObject',
          resource: `${BUCKET}/stale/upload-9`,
          secureTransport: false,
        }),
      ).toMatchObject({ allowed: false, reason: 'explicit-deny-resource' });
      // keep-10 is no keep-? and shares the first objects' class.
      expect(simulations() - before).toBe(4);
      expect(authorizer.denials.map((d) => d.resource)).toEqual([
        `${BUCKET}/fresh/a`,
        `${BUCKET}/fresh/b`,
        `${BUCKET}/stale/keep-1`,
        `${BUCKET}/stale/upload-9`,
      ]);
    });

    it('evaluates each object of its own where the policies use a variable, or the key holds a colon', async () => {
      const authorizer = new Authorizer({ iam: objects, accountId: ACCOUNT, region: 'us-east-1' });
      const own = rolePrincipal(roleArn('own'), 'own-fn');
      const before = simulations();
      for (const key of ['LOCALown:own-fn/a', 'LOCALown:own-fn/b']) {
        expect(
          await authorizer.authorize({ principal: own, action: 's3:DeleteObject', resource: `${BUCKET}/${key}` }),
        ).toMatchObject({ allowed: true });
      }
      expect(
        await authorizer.authorize({ principal: own, action: 's3:DeleteObject', resource: `${BUCKET}/someone-else/a` }),
      ).toMatchObject({ allowed: false });
      expect(simulations() - before).toBe(3);
      for (const key of ['stale/a:1', 'stale/a:2'])
        await authorizer.authorize({ principal: cleaner, action: 's3:DeleteObject', resource: `${BUCKET}/${key}` });
      expect(simulations() - before).toBe(5);
    });
  });

  describe('dynamodb:LeadingKeys', () => {
    const partitioned: PlannedIam = {
      roles: [
        role('consumer-a', [
          {
            Effect: 'Allow',
            Action: ['dynamodb:PutItem', 'dynamodb:Scan'],
            Resource: TABLE,
            Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['job-a#*', 'LIMITS#job-a'] } },
          },
        ]),
        role('by-user', [
          {
            Effect: 'Allow',
            Action: 'dynamodb:PutItem',
            Resource: TABLE,
            Condition: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['${aws:userid}'] } },
          },
        ]),
      ],
      resourcePolicies: [],
    };
    const consumer = rolePrincipal(roleArn('consumer-a'), 'consumer-a-fn');
    const put = (keys: string[]) => ({
      principal: consumer,
      action: 'dynamodb:PutItem',
      resource: TABLE,
      context: { 'dynamodb:LeadingKeys': keys },
    });
    const simulations = () => (runSimulation as jest.Mock).mock.calls.length;

    it("allows the role's own partitions, denies another's, and any request naming one of another's among its own", async () => {
      const authorizer = new Authorizer({ iam: partitioned, accountId: ACCOUNT, region: 'us-east-1' });
      expect(await authorizer.authorize(put(['job-a#x1']))).toMatchObject({ allowed: true });
      expect(await authorizer.authorize(put(['LIMITS#job-a']))).toMatchObject({ allowed: true });
      expect(await authorizer.authorize(put(['job-b#x1']))).toMatchObject({
        allowed: false,
        reason: 'no-identity-allow',
      });
      expect(await authorizer.authorize(put(['job-a-2#x1']))).toMatchObject({ allowed: false });
      expect(await authorizer.authorize(put(['job-a#x2', 'job-b#x2']))).toMatchObject({ allowed: false });
      // As on AWS, ForAllValues holds for a request that names no partition: a Scan is not bounded by the condition,
      // which is why the stack's partition-bounded grants never include Scan.
      expect(
        await authorizer.authorize({ principal: consumer, action: 'dynamodb:Scan', resource: TABLE }),
      ).toMatchObject({ allowed: true });
    });

    it('decides keys that match the same patterns once, and each class of its own', async () => {
      const authorizer = new Authorizer({ iam: partitioned, accountId: ACCOUNT, region: 'us-east-1' });
      const before = simulations();
      for (let i = 0; i < 5; i++)
        expect(await authorizer.authorize(put([`job-a#op-${i}`]))).toMatchObject({ allowed: true });
      expect(simulations() - before).toBe(1);
      for (let i = 0; i < 3; i++)
        expect(await authorizer.authorize(put([`job-b#op-${i}`]))).toMatchObject({ allowed: false });
      expect(await authorizer.authorize(put(['LIMITS#job-a']))).toMatchObject({ allowed: true });
      expect(simulations() - before).toBe(3);
      expect(authorizer.denials.map((d) => d.action)).toEqual([
        'dynamodb:PutItem',
        'dynamodb:PutItem',
        'dynamodb:PutItem',
      ]);
    });

    it('evaluates each key of its own where the pattern is a policy variable', async () => {
      const authorizer = new Authorizer({ iam: partitioned, accountId: ACCOUNT, region: 'us-east-1' });
      const user = rolePrincipal(roleArn('by-user'), 'u');
      const before = simulations();
      expect(
        await authorizer.authorize({
          principal: user,
          action: 'dynamodb:PutItem',
          resource: TABLE,
          context: { 'dynamodb:LeadingKeys': ['LOCALby-user:u'] },
        }),
      ).toMatchObject({ allowed: true });
      expect(
        await authorizer.authorize({
          principal: user,
          action: 'dynamodb:PutItem',
          resource: TABLE,
          context: { 'dynamodb:LeadingKeys': ['someone'] },
        }),
      ).toMatchObject({ allowed: false });
      expect(simulations() - before).toBe(2);
    });
  });

  describe('Option: enforce false', () => {
    it('lets a request AWS would deny through, and still records and reports it', async () => {
      const reported: Denial[] = [];
      const lenient = new Authorizer({
        iam,
        accountId: ACCOUNT,
        region: 'us-east-1',
        enforce: false,
        onDenial: (d) => reported.push(d),
      });
      const decision = await lenient.authorize({ principal: reader, action: 'dynamodb:PutItem', resource: TABLE });
      expect(decision).toMatchObject({ allowed: true, wouldDeny: true, reason: 'no-identity-allow' });
      expect(decision.message).toContain('is not authorized to perform: dynamodb:PutItem');
      expect(lenient.denials).toEqual([expect.objectContaining({ action: 'dynamodb:PutItem', enforced: false })]);
      expect(reported).toEqual(lenient.denials);
      expect(await lenient.authorize({ principal: reader, action: 'dynamodb:GetItem', resource: TABLE })).toEqual({
        allowed: true,
        wouldDeny: false,
      });
    });
  });
});
