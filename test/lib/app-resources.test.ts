// AppResources: created (self-contained environment) versus imported by name, and its props validation.
import { App, CfnResource, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AppResources } from '../../lib/app-resources';
import { appResourcesSchema } from '../../lib/config/schema';
import { InvalidPropsError } from '../../lib/props-error';
import { cdkJsonContext } from './cdkContext';
import { refOf, resourceOf } from './templateHelpers';

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
    buckets: { blobs: { bucketName: 'blobs-t' } },
    secrets: { key: { secretName: 'app/key' } },
  });

function build(create: boolean, retainData: boolean) {
  const stack = new Stack(new App({ context: cdkJsonContext() }), 'S');
  const resources = new AppResources(stack, 'App', { config: config(create), retainData });
  return { stack, resources, template: create ? Template.fromStack(stack) : undefined };
}

describe('Class: AppResources', () => {
  describe('Method: constructor (validation)', () => {
    it('names every duplicated physical name', () => {
      const stack = new Stack(new App(), 'S');
      const duplicated = appResourcesSchema.parse({
        tables: { a: { tableName: 'same', partitionKey: { name: 'id' } }, b: { tableName: 'same', partitionKey: { name: 'id' } } },
        buckets: { a: { bucketName: 'bucket-x' }, b: { bucketName: 'bucket-x' } },
        secrets: { a: { secretName: 's' }, b: { secretName: 's' } },
      });
      expect(() => new AppResources(stack, 'App', { config: duplicated, retainData: false, accessLogExpirationDays: 0 })).toThrow(
        new InvalidPropsError('AppResources S/App', [
          'tables: the table name "same" is used by more than one key',
          'buckets: the bucket name "bucket-x" is used by more than one key',
          'secrets: the secret name "s" is used by more than one key',
          'accessLogExpirationDays must be a positive integer (got 0)',
        ]),
      );
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
          GlobalSecondaryIndexes: [{ IndexName: 'by-owner', KeySchema: [{ AttributeName: 'owner', KeyType: 'HASH' }], Projection: { ProjectionType: 'ALL' } }],
          BillingMode: 'PAY_PER_REQUEST',
          SSESpecification: { SSEEnabled: true },
          PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        },
        DeletionPolicy: 'Retain',
      });
    });

    it('creates a private, TLS-only, encrypted bucket that logs to the access-log bucket', () => {
      const logs = built.resources.accessLogsBucket!;
      expect(resourceOf(built.template, built.resources.buckets.blobs)).toMatchObject({
        Properties: {
          BucketName: 'blobs-t',
          LoggingConfiguration: { DestinationBucketName: refOf(logs), LogFilePrefix: 'blobs-t/' },
          OwnershipControls: { Rules: [{ ObjectOwnership: 'BucketOwnerEnforced' }] },
        },
        DeletionPolicy: 'Retain',
      });
      expect(resourceOf(built.template, logs)).toMatchObject({
        Properties: {
          BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
          LifecycleConfiguration: { Rules: [{ ExpirationInDays: 90, Status: 'Enabled' }] },
        },
      });
      // Log delivery is authorised by the log bucket's policy, not by an ACL.
      built.template.hasResourceProperties('AWS::S3::BucketPolicy', {
        Bucket: refOf(logs),
        PolicyDocument: { Statement: [{}, { Action: 's3:PutObject', Effect: 'Allow', Principal: { Service: 'logging.s3.amazonaws.com' } }] },
      });
    });

    it('creates a secret with a generated value and reports names, not tokens', () => {
      built.template.hasResourceProperties('AWS::SecretsManager::Secret', {
        Name: 'app/key',
        GenerateSecretString: { PasswordLength: 40, ExcludePunctuation: true },
      });
      expect(built.resources.names).toEqual({ tables: { items: 'items-t' }, buckets: { blobs: 'blobs-t' }, secrets: { key: 'app/key' } });
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
      expect(resources.names.tables).toEqual({ items: 'items-t' });
    });
  });
});
