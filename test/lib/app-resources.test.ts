// AppResources: created (self-contained environment) versus imported by name, and its props validation.
import { App, CfnResource, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AppResources } from '../../lib/app-resources';
import { appResourcesSchema } from '../../lib/config/schema';
import { InvalidPropsError } from '../../lib/props-error';
import { testApp } from './cdkContext';
import { arnOf, logicalId, refOf, resourceOf } from './templateHelpers';

const config = (create: boolean) =>
  appResourcesSchema.parse({
    create,
    tables: {
      items: {
        tableName: 'items-t',
        partitionKey: { name: 'itemId' },
        sortKey: { name: 'version', type: 'N' },
        globalSecondaryIndexes: [{ indexName: 'by-owner', partitionKey: { name: 'owner' } }],
      },
    },
    // Created: `blobs` is named by CloudFormation, `named` opts into an explicit name. Imported: both by name.
    buckets: create
      ? { blobs: {}, named: { bucketName: 'named-t' } }
      : { blobs: { bucketName: 'blobs-t' }, named: { bucketName: 'named-t' } },
    secrets: { key: { secretName: 'app/key' } },
  });

function build(create: boolean, retainData: boolean) {
  const stack = new Stack(testApp(), 'S');
  const resources = new AppResources(stack, 'App', { config: config(create), retainData });
  return { stack, resources, template: create ? Template.fromStack(stack) : undefined };
}

describe('Class: AppResources', () => {
  describe('Method: constructor (validation)', () => {
    it('names every duplicated physical name', () => {
      const stack = new Stack(new App(), 'S');
      const duplicated = appResourcesSchema.parse({
        tables: {
          a: { tableName: 'same', partitionKey: { name: 'id' } },
          b: { tableName: 'same', partitionKey: { name: 'id' } },
        },
        buckets: { a: { bucketName: 'bucket-x' }, b: { bucketName: 'bucket-x' } },
        secrets: { a: { secretName: 's' }, b: { secretName: 's' } },
      });
      expect(
        () => new AppResources(stack, 'App', { config: duplicated, retainData: false, accessLogExpirationDays: 0 }),
      ).toThrow(
        new InvalidPropsError('AppResources S/App', [
          'tables: the table name "same" is used by more than one key',
          'buckets: the bucket name "bucket-x" is used by more than one key',
          'secrets: the secret name "s" is used by more than one key',
          'accessLogExpirationDays must be a positive integer (got 0)',
        ]),
      );
    });

    it('refuses an imported bucket without a name, which nothing else could identify', () => {
      const stack = new Stack(new App(), 'S');
      // The schema refuses this too; the construct checks on its own for props built without it.
      const unnamed = {
        ...appResourcesSchema.parse({ create: true, buckets: { a: {}, b: { bucketName: 'bucket-b' } } }),
        create: false,
      };
      expect(() => new AppResources(stack, 'App', { config: unnamed, retainData: false })).toThrow(
        new InvalidPropsError('AppResources S/App', [
          'buckets.a: an imported bucket (create false) needs its bucketName',
        ]),
      );
    });

    it('lets several created buckets go unnamed: only explicit names can collide', () => {
      const stack = new Stack(testApp(), 'S');
      const resources = new AppResources(stack, 'App', {
        config: appResourcesSchema.parse({ create: true, buckets: { a: {}, b: {} } }),
        retainData: false,
      });
      const buckets = Template.fromStack(stack).findResources('AWS::S3::Bucket');
      expect(Object.keys(buckets).sort()).toEqual(
        [logicalId(resources.accessLogsBucket!), logicalId(resources.buckets.a), logicalId(resources.buckets.b)].sort(),
      );
      expect(
        Object.values(buckets).map((b) => (b as { Properties: { BucketName?: string } }).Properties.BucketName),
      ).toEqual([undefined, undefined, undefined]);
    });
  });

  describe('Method: constructor (create)', () => {
    let built: ReturnType<typeof build> & { template: Template };
    beforeAll(() => {
      built = build(true, true) as ReturnType<typeof build> & { template: Template };
    });

    it('creates the table with its keys, index, on-demand billing, encryption, PITR and the retain policy', () => {
      expect(resourceOf(built.template, built.resources.tables.items)).toMatchObject({
        Type: 'AWS::DynamoDB::Table',
        Properties: {
          TableName: 'items-t',
          KeySchema: [
            { AttributeName: 'itemId', KeyType: 'HASH' },
            { AttributeName: 'version', KeyType: 'RANGE' },
          ],
          AttributeDefinitions: [
            { AttributeName: 'itemId', AttributeType: 'S' },
            { AttributeName: 'version', AttributeType: 'N' },
            { AttributeName: 'owner', AttributeType: 'S' },
          ],
          GlobalSecondaryIndexes: [
            {
              IndexName: 'by-owner',
              KeySchema: [{ AttributeName: 'owner', KeyType: 'HASH' }],
              Projection: { ProjectionType: 'ALL' },
            },
          ],
          BillingMode: 'PAY_PER_REQUEST',
          SSESpecification: { SSEEnabled: true },
          PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        },
        DeletionPolicy: 'Retain',
      });
    });

    it('creates a private, TLS-only, encrypted bucket, named by CloudFormation, that logs to the access-log bucket under its key', () => {
      const logs = built.resources.accessLogsBucket!;
      const blobs = resourceOf(built.template, built.resources.buckets.blobs);
      expect(blobs).toMatchObject({
        Properties: {
          LoggingConfiguration: { DestinationBucketName: refOf(logs), LogFilePrefix: 'blobs/' },
          OwnershipControls: { Rules: [{ ObjectOwnership: 'BucketOwnerEnforced' }] },
        },
        DeletionPolicy: 'Retain',
      });
      // S3 names are global: no fixed name that another account could already own.
      expect(blobs.Properties).not.toHaveProperty('BucketName');
      expect(resourceOf(built.template, logs)).toMatchObject({
        Properties: {
          BucketEncryption: {
            ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
          },
          LifecycleConfiguration: { Rules: [{ ExpirationInDays: 90, Status: 'Enabled' }] },
        },
      });
      // Log delivery is authorised by the log bucket's policy, not by an ACL, for each source bucket by its ARN
      // (a GetAtt, the name being CloudFormation's) into that bucket's own prefix.
      built.template.hasResourceProperties('AWS::S3::BucketPolicy', {
        Bucket: refOf(logs),
        PolicyDocument: {
          Statement: Match.arrayWith([
            {
              Action: 's3:PutObject',
              Effect: 'Allow',
              Principal: { Service: 'logging.s3.amazonaws.com' },
              Condition: {
                ArnLike: { 'aws:SourceArn': arnOf(built.resources.buckets.blobs) },
                StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
              },
              Resource: { 'Fn::Join': ['', [arnOf(logs), '/blobs/*']] },
            },
          ]),
        },
      });
    });

    it('keeps an explicitly configured name on a created bucket, with its log prefix still by key', () => {
      expect(resourceOf(built.template, built.resources.buckets.named).Properties).toMatchObject({
        BucketName: 'named-t',
        LoggingConfiguration: { LogFilePrefix: 'named/' },
      });
    });

    it('creates a secret with a generated value and reports its configured names, and buckets by what the construct names them', () => {
      built.template.hasResourceProperties('AWS::SecretsManager::Secret', {
        Name: 'app/key',
        GenerateSecretString: { PasswordLength: 40, ExcludePunctuation: true },
      });
      const { names } = built.resources;
      expect({ tables: names.tables, secrets: names.secrets }).toEqual({
        tables: { items: 'items-t' },
        secrets: { key: 'app/key' },
      });
      // Every created bucket is known by its Ref, named or not: consumers then also wait for the bucket to exist.
      expect(built.stack.resolve(names.buckets)).toEqual({
        blobs: refOf(built.resources.buckets.blobs),
        named: refOf(built.resources.buckets.named),
      });
    });
  });

  describe('Method: constructor (import)', () => {
    it('creates nothing and references every resource by its configured name', () => {
      const { stack, resources } = build(false, false);
      expect(stack.node.findAll().filter(CfnResource.isCfnResource)).toEqual([]);
      expect(stack.resolve(resources.tables.items.tableName)).toBe('items-t');
      expect(stack.resolve(resources.buckets.blobs.bucketName)).toBe('blobs-t');
      expect(stack.resolve(resources.secrets.key.secretName)).toBe('app/key');
      expect(resources.accessLogsBucket).toBeUndefined();
      expect(resources.names).toEqual({
        tables: { items: 'items-t' },
        buckets: { blobs: 'blobs-t', named: 'named-t' },
        secrets: { key: 'app/key' },
      });
    });

    it.each([false, true])(
      "lists each table's configured indexes by name (create %p), for grants that name them",
      (create) => {
        expect(build(create, false).resources.indexNames).toEqual({ items: ['by-owner'] });
      },
    );
  });
});
