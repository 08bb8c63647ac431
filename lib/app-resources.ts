// The application's own tables, buckets and secrets that jobs read and write: created here (a self-contained
// environment such as dev) or imported by name (they belong to the team's application in a real account).
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import type { EnvironmentConfig } from './config/schema';
import { acknowledge } from './nag';
import { pascalCase } from './outputs';
import { assertNoProblems } from './props-error';

export interface AppResourcesProps {
  /** `appResources` from the environment's configuration. */
  readonly config: EnvironmentConfig['appResources'];
  /** Keep created resources when the stack is deleted. */
  readonly retainData: boolean;
  /** Days created buckets' server access logs are kept. @default 90 */
  readonly accessLogExpirationDays?: number;
}

type AppResourcesConfig = EnvironmentConfig['appResources'];
type TableConfig = AppResourcesConfig['tables'][string];
type KeyConfig = TableConfig['partitionKey'];
type BucketConfig = AppResourcesConfig['buckets'][string];
type SecretConfig = AppResourcesConfig['secrets'][string];

const duplicates = (names: string[]): string[] => [...new Set(names.filter((n, i) => names.indexOf(n) !== i))];

const mapValues = <T, U>(record: Readonly<Record<string, T>>, f: (key: string, value: T) => U): Record<string, U> =>
  Object.fromEntries(Object.entries(record).map(([key, value]) => [key, f(key, value)]));

/** Every problem with the props, before anything is built: physical names used twice, an unnamed import, the expiry. */
function appResourcesProblems(config: AppResourcesConfig, accessLogExpirationDays: number): string[] {
  const usedTwice = (kind: 'table' | 'bucket' | 'secret', names: (string | undefined)[]): string[] =>
    duplicates(names.filter((name): name is string => name !== undefined)).map(
      (name) => `${kind}s: the ${kind} name "${name}" is used by more than one key`,
    );
  const problems = [
    ...usedTwice(
      'table',
      Object.values(config.tables).map((t) => t.tableName),
    ),
    ...usedTwice(
      'bucket',
      Object.values(config.buckets).map((b) => b.bucketName),
    ),
  ];
  if (!config.create) {
    for (const [key, bucket] of Object.entries(config.buckets)) {
      if (bucket.bucketName !== undefined) continue;
      problems.push(`buckets.${key}: an imported bucket (create false) needs its bucketName`);
    }
  }
  problems.push(
    ...usedTwice(
      'secret',
      Object.values(config.secrets).map((s) => s.secretName),
    ),
  );
  if (!Number.isInteger(accessLogExpirationDays) || accessLogExpirationDays < 1) {
    problems.push(`accessLogExpirationDays must be a positive integer (got ${accessLogExpirationDays})`);
  }
  return problems;
}

const tableId = (key: string) => `Table${pascalCase(key)}`;
const bucketId = (key: string) => `Bucket${pascalCase(key)}`;
const secretId = (key: string) => `Secret${pascalCase(key)}`;

const attribute = (key: KeyConfig): dynamodb.Attribute => ({
  name: key.name,
  type: key.type === 'N' ? dynamodb.AttributeType.NUMBER : dynamodb.AttributeType.STRING,
});

/**
 * Every table, bucket and secret in `appResources`, by its logical key, as the interfaces grants need. Imported
 * resources are referenced by name only; nothing is looked up at synth time, so synthesis works offline.
 */
export class AppResources extends Construct {
  public readonly tables: Readonly<Record<string, dynamodb.ITable>>;
  public readonly buckets: Readonly<Record<string, s3.IBucket>>;
  public readonly secrets: Readonly<Record<string, secretsmanager.ISecret>>;
  /**
   * Physical names by logical key, the ones each job's JOB_SETTINGS carries. Tables and secrets: plain strings from
   * config (secrets by name, which Secrets Manager resolves like an ARN). Buckets: the construct's own `bucketName`, the
   * configured literal for an imported bucket and a token resolving to `{ Ref: <bucket> }` for a created one (its name
   * may be CloudFormation's), so no consumer assumes a name the stack did not give.
   */
  public readonly names: Readonly<Record<'tables' | 'buckets' | 'secrets', Readonly<Record<string, string>>>>;
  /** Each table's configured secondary indexes, by logical key: query and scan grants name them (no `index/*`). */
  public readonly indexNames: Readonly<Record<string, readonly string[]>>;
  /** The bucket receiving created buckets' server access logs; absent when no bucket is created. */
  public readonly accessLogsBucket?: s3.Bucket;

  constructor(scope: Construct, id: string, props: AppResourcesProps) {
    const { config } = props;
    const accessLogExpirationDays = props.accessLogExpirationDays ?? 90;
    assertNoProblems(`AppResources ${scope.node.path}/${id}`, appResourcesProblems(config, accessLogExpirationDays));
    super(scope, id);
    // Log delivery authorised by a bucket policy rather than the legacy LogDeliveryWrite ACL, so every bucket here
    // can keep ACLs disabled (BucketOwnerEnforced). Set on this construct so it holds whatever the app's cdk.json says.
    this.node.setContext('@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy', true);

    const { create } = config;
    const removalPolicy = props.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    this.tables = mapValues(config.tables, (key, table) =>
      create ? this.createTable(key, table, removalPolicy) : this.importTable(key, table),
    );
    // Before the buckets, which send it their access logs.
    if (create && Object.keys(config.buckets).length > 0) {
      this.accessLogsBucket = this.createAccessLogsBucket(accessLogExpirationDays, removalPolicy);
    }
    this.buckets = mapValues(config.buckets, (key, bucket) =>
      create ? this.createBucket(key, bucket, removalPolicy) : this.importBucket(key, bucket),
    );
    this.secrets = mapValues(config.secrets, (key, secret) =>
      create ? this.createSecret(key, secret, removalPolicy) : this.importSecret(key, secret),
    );

    this.names = {
      tables: mapValues(config.tables, (_, t) => t.tableName),
      buckets: mapValues(this.buckets, (_, b) => b.bucketName),
      secrets: mapValues(config.secrets, (_, s) => s.secretName),
    };
    this.indexNames = mapValues(config.tables, (_, t) => t.globalSecondaryIndexes.map((i) => i.indexName));
  }

  private importTable(key: string, table: TableConfig): dynamodb.ITable {
    return dynamodb.Table.fromTableAttributes(this, tableId(key), {
      tableName: table.tableName,
      // Naming the indexes makes grants cover `<table>/index/*`, which the jobs' discovery queries need.
      globalIndexes: table.globalSecondaryIndexes.map((i) => i.indexName),
    });
  }

  private createTable(key: string, table: TableConfig, removalPolicy: RemovalPolicy): dynamodb.Table {
    const created = new dynamodb.Table(this, tableId(key), {
      tableName: table.tableName,
      partitionKey: attribute(table.partitionKey),
      sortKey: table.sortKey ? attribute(table.sortKey) : undefined,
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy,
    });
    for (const index of table.globalSecondaryIndexes) {
      created.addGlobalSecondaryIndex({
        indexName: index.indexName,
        partitionKey: attribute(index.partitionKey),
        sortKey: index.sortKey ? attribute(index.sortKey) : undefined,
        projectionType: dynamodb.ProjectionType.ALL,
      });
    }
    return created;
  }

  private createAccessLogsBucket(expirationDays: number, removalPolicy: RemovalPolicy): s3.Bucket {
    const bucket = new s3.Bucket(this, 'AccessLogs', {
      // Server access log delivery writes with SSE-S3 only.
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      lifecycleRules: [{ expiration: Duration.days(expirationDays) }],
      removalPolicy,
    });
    acknowledge(
      bucket,
      'AwsSolutions-S1',
      'This is the server access log bucket itself; logging its own access would log the log deliveries in a loop.',
    );
    return bucket;
  }

  private importBucket(key: string, bucket: BucketConfig): s3.IBucket {
    // Checked by appResourcesProblems: an imported bucket always has its name.
    return s3.Bucket.fromBucketName(this, bucketId(key), bucket.bucketName as string);
  }

  private createBucket(key: string, bucket: BucketConfig, removalPolicy: RemovalPolicy): s3.Bucket {
    return new s3.Bucket(this, bucketId(key), {
      // Unnamed unless the config opts in. S3 names are global, so a fixed name can belong to another account and
      // fail the first deploy there; CloudFormation's generated name (stack, logical ID, random suffix) is unique
      // even for two stacks in one account and cannot be claimed in advance, which a name derived from the account
      // and region could (account IDs are not secret). Consumers take it from the construct (a Ref).
      bucketName: bucket.bucketName,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      // Off on purpose: stale-upload-cleanup deletes objects to honour retention; versioning would keep every
      // deleted upload as a noncurrent version, defeating the deletion it exists to perform.
      versioned: false,
      serverAccessLogsBucket: this.accessLogsBucket,
      // One prefix per bucket in the shared log bucket, by logical key rather than by the bucket's name, which may be
      // CloudFormation's and known only after deploy; the key also stays the same if the bucket is ever replaced.
      serverAccessLogsPrefix: `${key}/`,
      // No autoDeleteObjects: it adds a custom-resource Lambda to the stack; a non-empty dev bucket blocks deletion
      // instead, which is the safer failure.
      removalPolicy,
    });
  }

  private importSecret(key: string, secret: SecretConfig): secretsmanager.ISecret {
    return secretsmanager.Secret.fromSecretNameV2(this, secretId(key), secret.secretName);
  }

  private createSecret(key: string, secret: SecretConfig, removalPolicy: RemovalPolicy): secretsmanager.Secret {
    const created = new secretsmanager.Secret(this, secretId(key), {
      secretName: secret.secretName,
      description: 'Demo value for a self-contained environment; replace it with the real credential after deploying.',
      generateSecretString: { passwordLength: 40, excludePunctuation: true },
      removalPolicy,
    });
    acknowledge(
      created,
      'AwsSolutions-SMG4',
      "A third party's API key: the provider issues and rotates it, so there is no rotation Lambda that could create " +
        'a new valid value; it is replaced by hand when the provider rotates it.',
    );
    return created;
  }
}
