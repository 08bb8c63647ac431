// What a job's `uses` may ask for: each access mode's exact IAM actions, in one table (config checks the names,
// lib/paced-job.ts grants the actions, docs/security.md shows the table). Pure data: no CDK, so ops/ may read it too.

/**
 * Table modes. The small ones say what a job does (`['get', 'delete']`: read an item by key, delete it; no Scan, no
 * Put); `read`, `write` and `readwrite` are the wide modes of earlier configs, kept so those still build. Query and
 * Scan are granted on the table and on each of its configured indexes by name (`<table>/index/<name>`); every other
 * action on the table alone.
 */
export const TABLE_MODES = {
  get: ['dynamodb:GetItem', 'dynamodb:BatchGetItem'],
  query: ['dynamodb:Query'],
  scan: ['dynamodb:Scan'],
  put: ['dynamodb:PutItem'],
  update: ['dynamodb:UpdateItem'],
  delete: ['dynamodb:DeleteItem'],
  read: [
    'dynamodb:GetItem',
    'dynamodb:BatchGetItem',
    'dynamodb:Query',
    'dynamodb:Scan',
    'dynamodb:ConditionCheckItem',
    'dynamodb:DescribeTable',
  ],
  write: [
    'dynamodb:PutItem',
    'dynamodb:UpdateItem',
    'dynamodb:DeleteItem',
    'dynamodb:BatchWriteItem',
    'dynamodb:ConditionCheckItem',
    'dynamodb:DescribeTable',
  ],
  readwrite: [
    'dynamodb:GetItem',
    'dynamodb:BatchGetItem',
    'dynamodb:Query',
    'dynamodb:Scan',
    'dynamodb:PutItem',
    'dynamodb:UpdateItem',
    'dynamodb:DeleteItem',
    'dynamodb:BatchWriteItem',
    'dynamodb:ConditionCheckItem',
    'dynamodb:DescribeTable',
  ],
} as const satisfies Record<string, readonly string[]>;

/**
 * Bucket modes: `delete` is s3:DeleteObject alone (a cleaner needs no read, list, put or legal hold). ListBucket is
 * granted on the bucket, every other action on its objects (`<bucket>/*`: object keys are data).
 */
export const BUCKET_MODES = {
  get: ['s3:GetObject'],
  list: ['s3:ListBucket'],
  put: ['s3:PutObject', 's3:AbortMultipartUpload'],
  delete: ['s3:DeleteObject'],
  read: ['s3:GetObject', 's3:ListBucket'],
  write: ['s3:PutObject', 's3:AbortMultipartUpload', 's3:DeleteObject'],
  readwrite: ['s3:GetObject', 's3:ListBucket', 's3:PutObject', 's3:AbortMultipartUpload', 's3:DeleteObject'],
} as const satisfies Record<string, readonly string[]>;

export type TableMode = keyof typeof TABLE_MODES;
export type BucketMode = keyof typeof BUCKET_MODES;

/** The modes that only read: of a use's `access` (both functions), the producer, whose discovery reads, gets these. */
export const READING_MODES: ReadonlySet<string> = new Set(['get', 'query', 'scan', 'list', 'read']);

/** The table actions of some modes, each once: on the table, and (Query, Scan) on its indexes. */
export function tableActions(modes: readonly TableMode[]): { table: string[]; indexes: string[] } {
  const table = [...new Set(modes.flatMap((mode) => TABLE_MODES[mode]))].sort();
  return { table, indexes: table.filter((a) => a === 'dynamodb:Query' || a === 'dynamodb:Scan') };
}

/** The bucket actions of some modes, each once: on the bucket (ListBucket), and on its objects. */
export function bucketActions(modes: readonly BucketMode[]): { bucket: string[]; objects: string[] } {
  const all = [...new Set(modes.flatMap((mode) => BUCKET_MODES[mode]))].sort();
  return { bucket: all.filter((a) => a === 's3:ListBucket'), objects: all.filter((a) => a !== 's3:ListBucket') };
}

/**
 * What each function of a job gets from one use: `access` is shorthand for both (the producer gets its reading modes,
 * `readwrite` reading as `read`), `discover` is the producer's, `apply` the consumer's.
 */
export function modesByFunction<M extends string>(use: {
  access?: readonly M[];
  discover?: readonly M[];
  apply?: readonly M[];
}): { discover: M[]; apply: M[] } {
  if (use.access === undefined) return { discover: [...(use.discover ?? [])], apply: [...(use.apply ?? [])] };
  const reading = use.access.flatMap((mode) =>
    mode === 'readwrite' ? ['read' as M] : READING_MODES.has(mode) ? [mode] : [],
  );
  return { discover: [...new Set(reading)], apply: [...use.access] };
}
