// IAM enforcement, step two: what a request asks for. Reads one HTTP request to a local AWS-protocol server and names
// the IAM actions and resource ARNs AWS authorizes it on (one request may need several, e.g. a batch write across
// tables, or a CopyObject's read of its source), so the authorizer can decide it as AWS would.
import type { StackPlan } from '../plan';

export type AwsService = 'dynamodb' | 'sqs' | 's3' | 'secretsmanager' | 'lambda' | 'scheduler';

export interface HttpRequestParts {
  method: string;
  /** Path and query, as the server receives it. */
  url: string;
  headers: Record<string, string | string[] | undefined>;
  /** The body; may be absent where requestNeedsBody says the description does not read it. */
  body?: string | Buffer;
}

/** One authorization AWS makes for a request. */
export interface RequiredPermission {
  action: string;
  resource: string;
  /** Service-specific context keys AWS sets for this check (e.g. kms:ViaService when SQS calls KMS for the caller). */
  context?: Record<string, string | string[]>;
}

export interface RequestDescription {
  service: AwsService;
  /** The API operation, e.g. PutItem, SendMessageBatch, PutObject. */
  operation: string;
  permissions: RequiredPermission[];
}

/**
 * The parts of a plan that name resources: queues (their keys and DLQs), secrets, mappings; and tables, whose key
 * schemas say which attribute of a request's keys is the partition key (dynamodb:LeadingKeys).
 */
export type RequestPlan = Pick<StackPlan, 'region' | 'accountId' | 'queues' | 'secrets' | 'mappings'> &
  Partial<Pick<StackPlan, 'tables'>>;

export class RequestDescriptionError extends Error {
  constructor(
    message: string,
    public readonly service: AwsService,
  ) {
    super(message);
    this.name = 'RequestDescriptionError';
  }
}

const header = (headers: HttpRequestParts['headers'], name: string): string | undefined => {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
};

const text = (body: HttpRequestParts['body']): string =>
  body === undefined ? '' : typeof body === 'string' ? body : body.toString('utf8');

/**
 * Whether describing this request reads its body. S3 object writes and Lambda invocations carry payloads the
 * description never looks at, so the gateway can stream them instead of buffering.
 */
export function requestNeedsBody(service: AwsService, method: string, url: string): boolean {
  if (service === 's3') return method === 'POST' && new URL(url, 'http://local').searchParams.has('delete');
  if (service === 'lambda') return false;
  if (service === 'scheduler') return method === 'PUT' || method === 'POST';
  return true;
}

/**
 * The permissions a request needs, as AWS authorizes it.
 * @throws RequestDescriptionError when the request cannot be read (no operation, a body that is not JSON, ...).
 */
export function describeRequest(service: AwsService, request: HttpRequestParts, plan: RequestPlan): RequestDescription {
  switch (service) {
    case 'dynamodb':
      return describeDynamoDb(request, plan);
    case 'sqs':
      return describeSqs(request, plan);
    case 's3':
      return describeS3(request, plan);
    case 'secretsmanager':
      return describeSecretsManager(request, plan);
    case 'lambda':
      return describeLambda(request, plan);
    case 'scheduler':
      return describeScheduler(request, plan);
  }
}

function jsonBody(request: HttpRequestParts, service: AwsService): Record<string, unknown> {
  const raw = text(request.body);
  if (raw === '') return {};
  try {
    const parsed = JSON.parse(raw) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // answered below
  }
  throw new RequestDescriptionError(`the ${service} request body is not a JSON object`, service);
}

function targetOperation(request: HttpRequestParts, prefix: string, service: AwsService): string {
  const target = header(request.headers, 'x-amz-target') ?? '';
  if (!target.startsWith(`${prefix}.`)) {
    throw new RequestDescriptionError(
      `the ${service} request has no X-Amz-Target ${prefix}.<Operation> (got ${JSON.stringify(target)})`,
      service,
    );
  }
  return target.slice(prefix.length + 1);
}

// ---------------------------------------------------------------------------------------------------------------------
// DynamoDB

function describeDynamoDb(request: HttpRequestParts, plan: RequestPlan): RequestDescription {
  const operation = targetOperation(request, 'DynamoDB_20120810', 'dynamodb');
  const body = jsonBody(request, 'dynamodb');
  // TableName may be a table ARN (DynamoDB accepts either).
  const tableArn = (name: unknown) => {
    const n = String(name);
    return n.startsWith('arn:') ? n : `arn:aws:dynamodb:${plan.region}:${plan.accountId}:table/${n}`;
  };
  const one = (action: string, resource: string, context?: RequiredPermission['context']): RequestDescription => ({
    service: 'dynamodb',
    operation,
    permissions: [{ action, resource, ...(context ? { context } : {}) }],
  });
  const keys = leadingKeysReader(plan, tableArn);
  switch (operation) {
    case 'Query':
    case 'Scan': {
      if (body.TableName === undefined) break;
      const table = tableArn(body.TableName);
      const resource = body.IndexName ? `${table}/index/${String(body.IndexName)}` : table;
      // A Scan names no partition, so it has no dynamodb:LeadingKeys (and a ForAllValues condition does not bound it).
      return one(`dynamodb:${operation}`, resource, operation === 'Query' ? keys.ofQuery(body) : undefined);
    }
    case 'GetItem':
    case 'UpdateItem':
    case 'DeleteItem':
    case 'PutItem': {
      if (body.TableName === undefined) break;
      const item = (operation === 'PutItem' ? body.Item : body.Key) as Item | undefined;
      return one(`dynamodb:${operation}`, tableArn(body.TableName), keys.of(body.TableName, item ? [item] : []));
    }
    case 'BatchGetItem':
    case 'BatchWriteItem':
      return { service: 'dynamodb', operation, permissions: batchPermissions(operation, body, keys, tableArn) };
    case 'TransactWriteItems':
      // Each item is authorized as the single-item write it is (AWS documents no TransactWriteItems action).
      return { service: 'dynamodb', operation, permissions: dedupe(transactWritePermissions(body, keys, tableArn)) };
    case 'TransactGetItems': {
      const items = (body.TransactItems ?? []) as { Get?: { TableName?: string; Key?: Item } }[];
      const permissions = items
        .filter((i) => i.Get)
        .map((i) => {
          const context = keys.of(i.Get!.TableName, [i.Get!.Key ?? {}]);
          return { action: 'dynamodb:GetItem', resource: tableArn(i.Get!.TableName), ...(context ? { context } : {}) };
        });
      return { service: 'dynamodb', operation, permissions: dedupe(permissions) };
    }
    case 'ExecuteStatement':
      return { service: 'dynamodb', operation, permissions: partiQl(String(body.Statement ?? ''), tableArn) };
    case 'BatchExecuteStatement':
    case 'ExecuteTransaction': {
      const statements = ((body.Statements ?? body.TransactStatements ?? []) as { Statement?: string }[]).map((s) =>
        String(s.Statement ?? ''),
      );
      return { service: 'dynamodb', operation, permissions: dedupe(statements.flatMap((s) => partiQl(s, tableArn))) };
    }
    default:
      break;
  }
  // Every other operation is authorized as itself: on its table (TableName), on ResourceArn (tags, resource
  // policies, backups) or, for account-wide ones (ListTables, DescribeLimits, ...), on "*".
  if (body.TableName !== undefined) return one(`dynamodb:${operation}`, tableArn(body.TableName));
  if (typeof body.ResourceArn === 'string') return one(`dynamodb:${operation}`, body.ResourceArn);
  return one(`dynamodb:${operation}`, '*');
}

/** What reads a request's dynamodb:LeadingKeys, and a table's ARN from its name (or ARN). */
type LeadingKeys = ReturnType<typeof leadingKeysReader>;
type TableArnOf = (name: unknown) => string;

/** BatchGetItem and BatchWriteItem: one permission per table, with the leading keys of its items. */
function batchPermissions(
  operation: string,
  body: Record<string, unknown>,
  keys: LeadingKeys,
  tableArn: TableArnOf,
): RequiredPermission[] {
  const requests = (body.RequestItems ?? {}) as Record<string, unknown>;
  return Object.entries(requests).map(([t, request]) => {
    // BatchGetItem: { Keys: [...] }; BatchWriteItem: [{ PutRequest: { Item } } | { DeleteRequest: { Key } }].
    type Write = { PutRequest?: { Item?: Item }; DeleteRequest?: { Key?: Item } };
    const items =
      operation === 'BatchGetItem'
        ? ((request as { Keys?: Item[] })?.Keys ?? [])
        : ((request ?? []) as Write[]).map((r) => r?.PutRequest?.Item ?? r?.DeleteRequest?.Key ?? {});
    const context = keys.of(t, items);
    return { action: `dynamodb:${operation}`, resource: tableArn(t), ...(context ? { context } : {}) };
  });
}

/** TransactWriteItems: each item as the single-item write it is, on its table, with its leading key. */
function transactWritePermissions(
  body: Record<string, unknown>,
  keys: LeadingKeys,
  tableArn: TableArnOf,
): RequiredPermission[] {
  const actions: Record<string, string> = {
    Put: 'PutItem',
    Update: 'UpdateItem',
    Delete: 'DeleteItem',
    ConditionCheck: 'ConditionCheckItem',
  };
  const items = (body.TransactItems ?? []) as Record<string, { TableName?: string; Key?: Item; Item?: Item }>[];
  return items.flatMap((item) =>
    Object.entries(item)
      .filter(([kind]) => actions[kind])
      .map(([kind, spec]) => {
        const context = keys.of(spec?.TableName, [(kind === 'Put' ? spec?.Item : spec?.Key) ?? {}]);
        return {
          action: `dynamodb:${actions[kind]}`,
          resource: tableArn(spec?.TableName),
          ...(context ? { context } : {}),
        };
      }),
  );
}

/** An item or key in DynamoDB's JSON: attribute name to a typed value ({ S: 'x' }, { N: '1' }, ...). */
type Item = Record<string, Record<string, unknown> | undefined>;

/**
 * dynamodb:LeadingKeys, as DynamoDB sets it: the partition key values a request names (its key, its item, every key of
 * a batch, a Query's partition in KeyConditionExpression), read with the table's key schema from the plan. Nothing for
 * a table the plan does not hold, whose partition key is unknown here. A Query of an index names the index's partition
 * key; DynamoDB's documentation speaks of the table's, and the stack's fine-grained grants are on tables without
 * indexes.
 */
function leadingKeysReader(plan: RequestPlan, tableArn: (name: unknown) => string) {
  const schemaOf = (name: unknown, index?: unknown): string | undefined => {
    const arn = tableArn(name);
    const table = plan.tables?.find((t) => t.arn === arn || t.name === String(name));
    if (!table) return undefined;
    type Index = { IndexName: string; KeySchema?: KeyElement[] };
    const props = table.properties as {
      KeySchema?: KeyElement[];
      GlobalSecondaryIndexes?: Index[];
      LocalSecondaryIndexes?: Index[];
    };
    const schema =
      index === undefined
        ? props.KeySchema
        : [...(props.GlobalSecondaryIndexes ?? []), ...(props.LocalSecondaryIndexes ?? [])].find(
            (i) => i.IndexName === String(index),
          )?.KeySchema;
    return schema?.find((k) => k.KeyType === 'HASH')?.AttributeName;
  };
  const scalarOf = (v: Record<string, unknown> | undefined): string | undefined => {
    const scalar = v?.S ?? v?.N ?? v?.B;
    return typeof scalar === 'string' ? scalar : undefined;
  };
  const context = (values: (string | undefined)[]): RequiredPermission['context'] | undefined => {
    const known = [...new Set(values.filter((v): v is string => v !== undefined))];
    return known.length > 0 ? { 'dynamodb:LeadingKeys': known } : undefined;
  };
  return {
    of: (table: unknown, items: Item[]) => {
      const key = schemaOf(table);
      return key === undefined ? undefined : context(items.map((item) => scalarOf(item?.[key])));
    },
    ofQuery: (body: Record<string, unknown>) => {
      const key = schemaOf(body.TableName, body.IndexName);
      if (key === undefined) return undefined;
      const values = (body.ExpressionAttributeValues ?? {}) as Item;
      const names = (body.ExpressionAttributeNames ?? {}) as Record<string, string>;
      // The legacy KeyConditions form: { <attribute>: { ComparisonOperator: 'EQ', AttributeValueList: [v] } }.
      const legacy = (
        body.KeyConditions as Record<string, { AttributeValueList?: Record<string, unknown>[] }> | undefined
      )?.[key];
      if (legacy) return context([scalarOf(legacy.AttributeValueList?.[0])]);
      for (const clause of String(body.KeyConditionExpression ?? '').split(/\s+AND\s+/i)) {
        const match = /^\(?\s*(#?[\w.-]+)\s*=\s*(:[\w]+)\s*\)?$/.exec(clause.trim());
        if (match && (names[match[1]] ?? match[1]) === key) return context([scalarOf(values[match[2]])]);
      }
      return undefined;
    },
  };
}

type KeyElement = { AttributeName: string; KeyType: string };

const PARTIQL_NAME = '("(?:[^"]|"")+"|[A-Za-z0-9_.-]+)(?:\\s*\\.\\s*"((?:[^"]|"")+)")?';
/** Where each PartiQL statement names its table: SELECT/DELETE ... FROM t, INSERT INTO t, UPDATE t, EXISTS(SELECT ...). */
const PARTIQL_TABLE: Record<string, RegExp> = {
  select: new RegExp(`\\bfrom\\s+${PARTIQL_NAME}`, 'i'),
  exists: new RegExp(`\\bfrom\\s+${PARTIQL_NAME}`, 'i'),
  delete: new RegExp(`\\bfrom\\s+${PARTIQL_NAME}`, 'i'),
  insert: new RegExp(`\\binto\\s+${PARTIQL_NAME}`, 'i'),
  update: new RegExp(`^\\s*update\\s+${PARTIQL_NAME}`, 'i'),
};

/** PartiQL statements are authorized as dynamodb:PartiQL<Verb> on the table (or index) they name. */
function partiQl(statement: string, tableArn: (name: unknown) => string): RequiredPermission[] {
  const verb = (/^\s*([A-Za-z]+)/.exec(statement)?.[1] ?? '').toLowerCase();
  const match = PARTIQL_TABLE[verb]?.exec(statement);
  if (!match)
    throw new RequestDescriptionError(
      `cannot read the table of the PartiQL statement ${JSON.stringify(statement.slice(0, 80))}`,
      'dynamodb',
    );
  const action = verb === 'exists' ? 'PartiQLSelect' : `PartiQL${verb[0].toUpperCase()}${verb.slice(1)}`;
  const unquote = (s: string) => (s.startsWith('"') ? s.slice(1, -1).replace(/""/g, '"') : s);
  const table = tableArn(unquote(match[1]));
  return [
    { action: `dynamodb:${action}`, resource: match[2] ? `${table}/index/${match[2].replace(/""/g, '"')}` : table },
  ];
}

function dedupe(permissions: RequiredPermission[]): RequiredPermission[] {
  const seen = new Set<string>();
  return permissions.filter((p) => {
    const key = `${p.action} ${p.resource}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

// ---------------------------------------------------------------------------------------------------------------------
// SQS

/** Batch operations are authorized as the single-message action they repeat. */
const SQS_ACTION_OF: Record<string, string> = {
  SendMessageBatch: 'SendMessage',
  DeleteMessageBatch: 'DeleteMessage',
  ChangeMessageVisibilityBatch: 'ChangeMessageVisibility',
};

const SQS_ACCOUNT_WIDE = new Set(['ListQueues']);

function sqsParameters(request: HttpRequestParts): {
  operation: string;
  params: Record<string, unknown>;
  json: boolean;
} {
  const target = header(request.headers, 'x-amz-target');
  if (target !== undefined) {
    // The JSON protocol (the current SDKs): AmazonSQS.<Operation>, parameters in a JSON body.
    return { operation: targetOperation(request, 'AmazonSQS', 'sqs'), params: jsonBody(request, 'sqs'), json: true };
  }
  // The query protocol (older SDKs, the AWS CLI v1): Action=<Operation> in a form body or the query string.
  const url = new URL(request.url, 'http://local');
  const params: Record<string, unknown> = Object.fromEntries(url.searchParams);
  for (const [k, v] of new URLSearchParams(text(request.body))) params[k] = v;
  if (typeof params.Action !== 'string' || params.Action === '') {
    throw new RequestDescriptionError('the SQS request names no operation (neither X-Amz-Target nor Action=)', 'sqs');
  }
  // A query-protocol request may be posted to the queue's URL itself instead of naming QueueUrl.
  if (params.QueueUrl === undefined && /^\/\d{12}\/[^/]+$/.test(url.pathname)) params.QueueUrl = url.pathname;
  return { operation: params.Action, params, json: false };
}

/** Whether a request to the SQS server uses the JSON protocol (else the query protocol, answered in XML). */
export function isSqsJsonRequest(headers: HttpRequestParts['headers']): boolean {
  return header(headers, 'x-amz-target') !== undefined;
}

function describeSqs(request: HttpRequestParts, plan: RequestPlan): RequestDescription {
  const { operation, params } = sqsParameters(request);
  const queueArnOfUrl = (queueUrl: unknown): string => {
    const path = new URL(String(queueUrl), 'http://local').pathname.split('/').filter(Boolean);
    if (path.length < 2)
      throw new RequestDescriptionError(`QueueUrl ${JSON.stringify(queueUrl)} names no <account>/<queue>`, 'sqs');
    return `arn:aws:sqs:${plan.region}:${path[path.length - 2]}:${path[path.length - 1]}`;
  };
  const queueArnOfName = (name: unknown, account?: unknown) =>
    `arn:aws:sqs:${plan.region}:${account ? String(account) : plan.accountId}:${String(name)}`;
  const permissions: RequiredPermission[] = [];
  const action = `sqs:${SQS_ACTION_OF[operation] ?? operation}`;

  if (SQS_ACCOUNT_WIDE.has(operation)) {
    permissions.push({ action, resource: '*' });
  } else if (operation === 'GetQueueUrl' || operation === 'CreateQueue') {
    if (params.QueueName === undefined) throw new RequestDescriptionError(`${operation} names no QueueName`, 'sqs');
    permissions.push({ action, resource: queueArnOfName(params.QueueName, params.QueueOwnerAWSAccountId) });
  } else if (operation === 'StartMessageMoveTask') {
    // Redriving reads the dead-letter queue and writes the destination on the caller's behalf, so the caller needs
    // all of it (the SQS developer guide's "permissions for dead-letter queue redrive").
    const source = String(params.SourceArn ?? '');
    if (!source) throw new RequestDescriptionError('StartMessageMoveTask names no SourceArn', 'sqs');
    for (const a of ['StartMessageMoveTask', 'ReceiveMessage', 'DeleteMessage', 'GetQueueAttributes'])
      permissions.push({ action: `sqs:${a}`, resource: source });
    // Without a DestinationArn the messages go back to the queues whose redrive policy names this DLQ.
    const destinations = params.DestinationArn
      ? [String(params.DestinationArn)]
      : plan.queues.filter((q) => q.deadLetterTargetArn === source).map((q) => q.arn);
    for (const d of destinations) permissions.push({ action: 'sqs:SendMessage', resource: d });
  } else if (operation === 'ListMessageMoveTasks') {
    permissions.push({ action, resource: String(params.SourceArn ?? '*') });
  } else if (operation === 'CancelMessageMoveTask') {
    // The handle is base64 JSON naming the task's source queue (AWS's format, and local-aws-sqs's).
    let source = '*';
    try {
      source = String(
        (JSON.parse(Buffer.from(String(params.TaskHandle ?? ''), 'base64').toString('utf8')) as { sourceArn?: string })
          .sourceArn ?? '*',
      );
    } catch {
      // an unreadable handle: the server answers it; authorized as on any queue
    }
    permissions.push({ action, resource: source });
  } else {
    if (params.QueueUrl === undefined) throw new RequestDescriptionError(`${operation} names no QueueUrl`, 'sqs');
    permissions.push({ action, resource: queueArnOfUrl(params.QueueUrl) });
  }

  // A queue encrypted with a KMS key: SQS asks KMS for a data key when a message is sent and to decrypt it when one is
  // received, on the caller's behalf, so the caller needs those KMS permissions too (SQS developer guide, "Key
  // management"). The current template uses SQS-managed SSE, which needs none.
  const queue = permissions.length ? plan.queues.find((q) => q.arn === permissions[0].resource) : undefined;
  if (queue?.kmsKeyArn) {
    const kms = operation.startsWith('SendMessage')
      ? 'kms:GenerateDataKey'
      : operation === 'ReceiveMessage'
        ? 'kms:Decrypt'
        : undefined;
    if (kms) {
      permissions.push({
        action: kms,
        resource: queue.kmsKeyArn,
        context: { 'kms:ViaService': `sqs.${plan.region}.amazonaws.com`, 'kms:CallerAccount': plan.accountId },
      });
    }
  }
  return { service: 'sqs', operation, permissions };
}

// ---------------------------------------------------------------------------------------------------------------------
// S3 (path-style, as every local client addresses it: the endpoint is an IP address)

/** Bucket subresources and the actions that read, write and delete them. */
const BUCKET_SUBRESOURCES: Record<string, { GET?: string; PUT?: string; DELETE?: string }> = {
  acl: { GET: 'GetBucketAcl', PUT: 'PutBucketAcl' },
  cors: { GET: 'GetBucketCORS', PUT: 'PutBucketCORS', DELETE: 'PutBucketCORS' },
  encryption: {
    GET: 'GetEncryptionConfiguration',
    PUT: 'PutEncryptionConfiguration',
    DELETE: 'PutEncryptionConfiguration',
  },
  lifecycle: {
    GET: 'GetLifecycleConfiguration',
    PUT: 'PutLifecycleConfiguration',
    DELETE: 'PutLifecycleConfiguration',
  },
  location: { GET: 'GetBucketLocation' },
  logging: { GET: 'GetBucketLogging', PUT: 'PutBucketLogging' },
  notification: { GET: 'GetBucketNotification', PUT: 'PutBucketNotification' },
  ownershipControls: {
    GET: 'GetBucketOwnershipControls',
    PUT: 'PutBucketOwnershipControls',
    DELETE: 'PutBucketOwnershipControls',
  },
  policy: { GET: 'GetBucketPolicy', PUT: 'PutBucketPolicy', DELETE: 'DeleteBucketPolicy' },
  publicAccessBlock: {
    GET: 'GetBucketPublicAccessBlock',
    PUT: 'PutBucketPublicAccessBlock',
    DELETE: 'PutBucketPublicAccessBlock',
  },
  tagging: { GET: 'GetBucketTagging', PUT: 'PutBucketTagging', DELETE: 'PutBucketTagging' },
  uploads: { GET: 'ListBucketMultipartUploads' },
  versioning: { GET: 'GetBucketVersioning', PUT: 'PutBucketVersioning' },
  versions: { GET: 'ListBucketVersions' },
  website: { GET: 'GetBucketWebsite', PUT: 'PutBucketWebsite', DELETE: 'DeleteBucketWebsite' },
};

/** Object subresources: the operation, its action, and the action when a versionId names one version. */
const OBJECT_SUBRESOURCES: Record<
  string,
  Partial<Record<'GET' | 'PUT' | 'DELETE', [operation: string, action: string, versionAction: string]>>
> = {
  acl: {
    GET: ['GetObjectAcl', 'GetObjectAcl', 'GetObjectVersionAcl'],
    PUT: ['PutObjectAcl', 'PutObjectAcl', 'PutObjectVersionAcl'],
  },
  tagging: {
    GET: ['GetObjectTagging', 'GetObjectTagging', 'GetObjectVersionTagging'],
    PUT: ['PutObjectTagging', 'PutObjectTagging', 'PutObjectVersionTagging'],
    DELETE: ['DeleteObjectTagging', 'DeleteObjectTagging', 'DeleteObjectVersionTagging'],
  },
  attributes: { GET: ['GetObjectAttributes', 'GetObjectAttributes', 'GetObjectVersionAttributes'] },
  retention: {
    GET: ['GetObjectRetention', 'GetObjectRetention', 'GetObjectRetention'],
    PUT: ['PutObjectRetention', 'PutObjectRetention', 'PutObjectRetention'],
  },
  'legal-hold': {
    GET: ['GetObjectLegalHold', 'GetObjectLegalHold', 'GetObjectLegalHold'],
    PUT: ['PutObjectLegalHold', 'PutObjectLegalHold', 'PutObjectLegalHold'],
  },
};

function describeS3(request: HttpRequestParts, _plan: RequestPlan): RequestDescription {
  const url = new URL(request.url, 'http://local');
  // The SDK names the operation in x-id; it is no subresource. Presigned URLs carry their signature as X-Amz-*.
  const query = [...url.searchParams.keys()].filter((k) => k !== 'x-id' && !k.startsWith('X-Amz-'));
  const [bucket, ...rest] = url.pathname.slice(1).split('/');
  const key = rest.map((s) => decodeURIComponent(s)).join('/');
  const bucketName = decodeURIComponent(bucket ?? '');
  if (!bucketName) return s3('ListBuckets', [{ action: 's3:ListAllMyBuckets', resource: '*' }]);
  const target: S3Target = {
    method: request.method.toUpperCase(),
    params: url.searchParams,
    query,
    bucketName,
    bucketArn: `arn:aws:s3:::${bucketName}`,
    key,
  };
  if (rest.length === 0 || (rest.length === 1 && rest[0] === '')) return describeS3Bucket(request, target);
  return describeS3Object(request, target);
}

/** What describeS3's parts read of a request's path and query. */
interface S3Target {
  /** Upper case. */
  method: string;
  params: URLSearchParams;
  /** The query's keys that can name a subresource. */
  query: string[];
  bucketName: string;
  bucketArn: string;
  /** The object key, decoded; empty for a request on the bucket. */
  key: string;
}

const s3 = (operation: string, permissions: RequiredPermission[]): RequestDescription => ({
  service: 's3',
  operation,
  permissions,
});

function describeS3Bucket(request: HttpRequestParts, target: S3Target): RequestDescription {
  const { method, bucketArn } = target;
  if (method === 'POST' && target.params.has('delete')) return describeDeleteObjects(request, bucketArn);
  const sub = target.query.find((q) => BUCKET_SUBRESOURCES[q]);
  if (sub) {
    const action = BUCKET_SUBRESOURCES[sub][method as 'GET' | 'PUT' | 'DELETE'];
    if (action) return s3(action, [{ action: `s3:${action}`, resource: bucketArn }]);
  }
  if (method === 'GET' || method === 'HEAD')
    return s3(method === 'GET' ? 'ListObjects' : 'HeadBucket', [{ action: 's3:ListBucket', resource: bucketArn }]);
  if (method === 'PUT') return s3('CreateBucket', [{ action: 's3:CreateBucket', resource: bucketArn }]);
  if (method === 'DELETE') return s3('DeleteBucket', [{ action: 's3:DeleteBucket', resource: bucketArn }]);
  throw new RequestDescriptionError(
    `${method} on bucket ${target.bucketName} is no S3 operation the local gateway knows`,
    's3',
  );
}

/** DeleteObjects: each key is authorized as its own DeleteObject (DeleteObjectVersion for a version). */
function describeDeleteObjects(request: HttpRequestParts, bucketArn: string): RequestDescription {
  const objects = [...text(request.body).matchAll(/<Object>([\s\S]*?)<\/Object>/g)].map((m) => ({
    key: unescapeXml(/<Key>([\s\S]*?)<\/Key>/.exec(m[1])?.[1] ?? ''),
    version: /<VersionId>/.test(m[1]),
  }));
  return s3(
    'DeleteObjects',
    dedupe(
      objects.map((o) => ({
        action: o.version ? 's3:DeleteObjectVersion' : 's3:DeleteObject',
        resource: `${bucketArn}/${o.key}`,
      })),
    ),
  );
}

function describeS3Object(request: HttpRequestParts, target: S3Target): RequestDescription {
  const { method, params } = target;
  const objectArn = `${target.bucketArn}/${target.key}`;
  const versioned = params.has('versionId');
  const sub = target.query.find((q) => OBJECT_SUBRESOURCES[q]);
  if (sub) {
    const entry = OBJECT_SUBRESOURCES[sub][method as 'GET' | 'PUT' | 'DELETE'];
    if (entry) return s3(entry[0], [{ action: `s3:${versioned ? entry[2] : entry[1]}`, resource: objectArn }]);
  }
  const uploadId = params.has('uploadId');
  switch (method) {
    case 'GET':
      if (uploadId) return s3('ListParts', [{ action: 's3:ListMultipartUploadParts', resource: objectArn }]);
      return s3('GetObject', [{ action: versioned ? 's3:GetObjectVersion' : 's3:GetObject', resource: objectArn }]);
    case 'HEAD':
      return s3('HeadObject', [{ action: versioned ? 's3:GetObjectVersion' : 's3:GetObject', resource: objectArn }]);
    case 'PUT':
      return describeS3ObjectPut(request, objectArn, uploadId);
    case 'POST':
      // CreateMultipartUpload (?uploads) and CompleteMultipartUpload (?uploadId) are object writes.
      return s3(params.has('uploads') ? 'CreateMultipartUpload' : 'CompleteMultipartUpload', [
        { action: 's3:PutObject', resource: objectArn },
      ]);
    case 'DELETE':
      if (uploadId) return s3('AbortMultipartUpload', [{ action: 's3:AbortMultipartUpload', resource: objectArn }]);
      return s3('DeleteObject', [
        { action: versioned ? 's3:DeleteObjectVersion' : 's3:DeleteObject', resource: objectArn },
      ]);
    default:
      throw new RequestDescriptionError(
        `${method} on s3://${target.bucketName}/${target.key} is no S3 operation the local gateway knows`,
        's3',
      );
  }
}

/**
 * PutObject, UploadPart (s3:PutObject too); with x-amz-copy-source, CopyObject / UploadPartCopy, which also read the
 * source object.
 */
function describeS3ObjectPut(request: HttpRequestParts, objectArn: string, uploadId: boolean): RequestDescription {
  const permissions: RequiredPermission[] = [{ action: 's3:PutObject', resource: objectArn }];
  const copySource = header(request.headers, 'x-amz-copy-source');
  if (copySource) {
    const [sourcePath, sourceQuery] = decodeURIComponent(copySource).replace(/^\//, '').split('?');
    const sourceVersioned = new URLSearchParams(sourceQuery ?? '').has('versionId');
    permissions.push({
      action: sourceVersioned ? 's3:GetObjectVersion' : 's3:GetObject',
      resource: `arn:aws:s3:::${sourcePath}`,
    });
  }
  return s3(
    copySource ? (uploadId ? 'UploadPartCopy' : 'CopyObject') : uploadId ? 'UploadPart' : 'PutObject',
    permissions,
  );
}

function unescapeXml(s: string): string {
  return s
    .replace(/&#x([0-9a-f]+);/gi, (_, h: string) => String.fromCodePoint(parseInt(h, 16)))
    .replace(/&#(\d+);/g, (_, d: string) => String.fromCodePoint(Number(d)))
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&');
}

// ---------------------------------------------------------------------------------------------------------------------
// Secrets Manager

const SECRETS_ACCOUNT_WIDE = new Set(['ListSecrets', 'GetRandomPassword']);

function describeSecretsManager(request: HttpRequestParts, plan: RequestPlan): RequestDescription {
  const operation = targetOperation(request, 'secretsmanager', 'secretsmanager');
  const body = jsonBody(request, 'secretsmanager');
  const action = `secretsmanager:${operation}`;
  // By name, full ARN, or partial ARN (without the random suffix), as the service resolves SecretId.
  const secretArn = (id: unknown): string => {
    const s = String(id);
    const known = plan.secrets.find((x) => x.name === s || x.arn === s || x.arn.startsWith(`${s}-`));
    if (known) return known.arn;
    return s.startsWith('arn:') ? s : `arn:aws:secretsmanager:${plan.region}:${plan.accountId}:secret:${s}`;
  };
  if (SECRETS_ACCOUNT_WIDE.has(operation))
    return { service: 'secretsmanager', operation, permissions: [{ action, resource: '*' }] };
  if (operation === 'BatchGetSecretValue') {
    // The batch call itself is account-wide; each secret it returns is a GetSecretValue on that secret.
    const ids = (body.SecretIdList ?? []) as unknown[];
    return {
      service: 'secretsmanager',
      operation,
      permissions: [
        { action, resource: '*' },
        ...ids.map((id) => ({ action: 'secretsmanager:GetSecretValue', resource: secretArn(id) })),
      ],
    };
  }
  if (operation === 'CreateSecret') {
    if (body.Name === undefined) throw new RequestDescriptionError('CreateSecret names no Name', 'secretsmanager');
    return { service: 'secretsmanager', operation, permissions: [{ action, resource: secretArn(body.Name) }] };
  }
  if (body.SecretId === undefined)
    throw new RequestDescriptionError(`${operation} names no SecretId`, 'secretsmanager');
  return { service: 'secretsmanager', operation, permissions: [{ action, resource: secretArn(body.SecretId) }] };
}

// ---------------------------------------------------------------------------------------------------------------------
// Lambda (the operations local/lambdaApi.ts serves, and the rest of the function and mapping API by its paths)

const FUNCTION_PATH = /^\/2015-03-31\/functions\/([^/]+)(\/.*)?$/;
const MAPPINGS_PATH = /^\/2015-03-31\/event-source-mappings\/?$/;
const MAPPING_PATH = /^\/2015-03-31\/event-source-mappings\/([^/]+)$/;
const CONCURRENCY_PATH = /^\/2017-10-31\/functions\/([^/]+)\/concurrency$/;

function describeLambda(request: HttpRequestParts, plan: RequestPlan): RequestDescription {
  const url = new URL(request.url, 'http://local');
  const method = request.method.toUpperCase();
  const lambda = (operation: string, resource: string, context?: Record<string, string>): RequestDescription => ({
    service: 'lambda',
    operation,
    permissions: [{ action: `lambda:${operation}`, resource, ...(context ? { context } : {}) }],
  });
  // FunctionName: a name, name:qualifier, a partial ARN (<account>:function:<name>) or a full ARN.
  const functionArn = (raw: string, qualifier?: string | null): string => {
    const name = decodeURIComponent(raw);
    const m = /^(?:arn:aws[a-z-]*:lambda:[^:]+:)?(?:(\d{12}):function:)?([^:]+)(?::([^:]+))?$/.exec(name);
    if (!m)
      throw new RequestDescriptionError(
        `FunctionName ${JSON.stringify(name)} is neither a name nor a function ARN`,
        'lambda',
      );
    const q = m[3] ?? qualifier ?? undefined;
    return `arn:aws:lambda:${plan.region}:${m[1] ?? plan.accountId}:function:${m[2]}${q ? `:${q}` : ''}`;
  };
  const fn = FUNCTION_PATH.exec(url.pathname);
  if (fn) {
    const arn = functionArn(fn[1], url.searchParams.get('Qualifier'));
    const tail = fn[2] ?? '';
    if (tail === '/invocations' && method === 'POST') return lambda('InvokeFunction', arn);
    if (tail === '/configuration' && method === 'GET') return lambda('GetFunctionConfiguration', arn);
    if (tail === '/configuration' && method === 'PUT') return lambda('UpdateFunctionConfiguration', arn);
    if (tail === '/policy' && method === 'GET') return lambda('GetPolicy', arn);
    if ((tail === '' || tail === '/') && method === 'GET') return lambda('GetFunction', arn);
    if ((tail === '' || tail === '/') && method === 'DELETE') return lambda('DeleteFunction', arn);
    throw new RequestDescriptionError(
      `${method} ${url.pathname} is no Lambda operation the local gateway knows`,
      'lambda',
    );
  }
  const concurrency = CONCURRENCY_PATH.exec(url.pathname);
  if (concurrency) {
    const arn = functionArn(concurrency[1]);
    const operation =
      method === 'PUT'
        ? 'PutFunctionConcurrency'
        : method === 'DELETE'
          ? 'DeleteFunctionConcurrency'
          : 'GetFunctionConcurrency';
    return lambda(operation, arn);
  }
  if (MAPPINGS_PATH.test(url.pathname)) {
    if (method === 'GET') return lambda('ListEventSourceMappings', '*');
    if (method === 'POST') return lambda('CreateEventSourceMapping', '*');
  }
  const mapping = MAPPING_PATH.exec(url.pathname);
  if (mapping) {
    const uuid = decodeURIComponent(mapping[1]);
    const operation = (
      { GET: 'GetEventSourceMapping', PUT: 'UpdateEventSourceMapping', DELETE: 'DeleteEventSourceMapping' } as Record<
        string,
        string
      >
    )[method];
    if (operation) {
      // AWS sets lambda:FunctionArn on mapping operations, so a policy can scope them to the mappings of one function.
      const planned = plan.mappings.find((m) => `local-${m.logicalId}` === uuid);
      const context = planned ? { 'lambda:FunctionArn': functionArn(planned.functionName) } : undefined;
      return lambda(operation, `arn:aws:lambda:${plan.region}:${plan.accountId}:event-source-mapping:${uuid}`, context);
    }
  }
  if (/^\/2015-03-31\/functions\/?$/.test(url.pathname) && method === 'GET') return lambda('ListFunctions', '*');
  throw new RequestDescriptionError(
    `${method} ${url.pathname} is no Lambda operation the local gateway knows`,
    'lambda',
  );
}

// ---------------------------------------------------------------------------------------------------------------------
// EventBridge Scheduler (local/schedulerApi.ts)

function describeScheduler(request: HttpRequestParts, plan: RequestPlan): RequestDescription {
  const url = new URL(request.url, 'http://local');
  const method = request.method.toUpperCase();
  if (url.pathname === '/schedules' && method === 'GET') {
    return {
      service: 'scheduler',
      operation: 'ListSchedules',
      permissions: [{ action: 'scheduler:ListSchedules', resource: '*' }],
    };
  }
  const one = /^\/schedules\/([^/]+)$/.exec(url.pathname);
  if (!one)
    throw new RequestDescriptionError(
      `${method} ${url.pathname} is no Scheduler operation the local gateway knows`,
      'scheduler',
    );
  const name = decodeURIComponent(one[1]);
  const body = method === 'PUT' || method === 'POST' ? jsonBody(request, 'scheduler') : {};
  const group = String(body.GroupName ?? url.searchParams.get('groupName') ?? 'default');
  const resource = `arn:aws:scheduler:${plan.region}:${plan.accountId}:schedule/${group}/${name}`;
  const operation = (
    { GET: 'GetSchedule', PUT: 'UpdateSchedule', POST: 'CreateSchedule', DELETE: 'DeleteSchedule' } as Record<
      string,
      string
    >
  )[method];
  if (!operation) throw new RequestDescriptionError(`${method} on a schedule is no Scheduler operation`, 'scheduler');
  const permissions: RequiredPermission[] = [{ action: `scheduler:${operation}`, resource }];
  // Creating or updating a schedule hands its target role to Scheduler: iam:PassRole on that role.
  const roleArn = (body.Target as { RoleArn?: string } | undefined)?.RoleArn;
  if (roleArn)
    permissions.push({
      action: 'iam:PassRole',
      resource: roleArn,
      context: { 'iam:PassedToService': 'scheduler.amazonaws.com' },
    });
  return { service: 'scheduler', operation, permissions };
}
