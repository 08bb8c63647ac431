// Demo data for a local run: writes the items each job discovers, in the shapes the jobs document (their items.ts
// builders, imported for seeding only), into the tables and bucket the stack hands each job in JOB_SETTINGS.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { demoPayments } from '../lambda/jobs/payment-reconciliation/items';
import { demoUploads } from '../lambda/jobs/stale-upload-cleanup/items';
import { demoSessions, demoTenants } from '../lambda/jobs/expired-session-cleanup/items';
import type { JobRuntimeSettings } from '../lambda/core/constants';

export interface SeedCounts {
  payments: number;
  uploads: number;
  tenants: number;
  /** Expired and active sessions per tenant. @default { expired: 3, active: 2 } */
  sessionsPerTenant?: { expired: number; active: number };
}

/** What was written, so the report can check each effect against what should have happened. */
export interface SeedResult {
  paymentIds: string[];
  uploadKeys: string[];
  expiredSessions: string[];
  activeSessions: string[];
}

export class SeedError extends Error {
  constructor(message: string, public readonly job: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SeedError';
  }
}

const DAY_MS = 86_400_000;

function alias(settings: JobRuntimeSettings, kind: 'tables' | 'buckets', name: string): string {
  const value = settings[kind][name];
  if (!value) throw new SeedError(`job ${settings.jobName} has no ${kind}.${name} in its JOB_SETTINGS; cannot seed it`, settings.jobName);
  return value;
}

async function putAll(documents: DynamoDBDocumentClient, table: string, items: object[]): Promise<void> {
  for (let i = 0; i < items.length; i += 25) {
    let requests: Record<string, { PutRequest: { Item: Record<string, unknown> } }[]> | undefined = {
      [table]: items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item: Item as Record<string, unknown> } })),
    };
    // BatchWrite may hand back unprocessed items; resend them until none remain.
    for (let attempt = 0; requests && Object.keys(requests).length > 0; attempt++) {
      if (attempt > 10) throw new SeedError(`table ${table}: items still unprocessed after 10 retries`, table);
      const out = await documents.send(new BatchWriteCommand({ RequestItems: requests }));
      requests = out.UnprocessedItems as typeof requests;
    }
  }
}

export interface SeedTargets {
  dynamodb: DynamoDBClient;
  s3: S3Client;
  /** JOB_SETTINGS of each job present in the stack, by job name. */
  jobs: Map<string, JobRuntimeSettings>;
  businessDate: string;
}

/**
 * Seeds the jobs present in the stack. Payments are due on the business date; uploads fall due across it (their
 * objects are put in the bucket); each tenant gets sessions on both sides of the job's cutoff (the start of the
 * business date, UTC, minus sessionMaxAgeDays).
 */
export async function seedDemoData(targets: SeedTargets, counts: SeedCounts): Promise<SeedResult> {
  const documents = DynamoDBDocumentClient.from(targets.dynamodb, { marshallOptions: { removeUndefinedValues: true } });
  const result: SeedResult = { paymentIds: [], uploadKeys: [], expiredSessions: [], activeSessions: [] };

  const payments = targets.jobs.get('payment-reconciliation');
  if (payments && counts.payments > 0) {
    const items = demoPayments(targets.businessDate, counts.payments);
    await putAll(documents, alias(payments, 'tables', 'payments'), items);
    result.paymentIds = items.map((p) => p.paymentId);
  }

  const uploads = targets.jobs.get('stale-upload-cleanup');
  if (uploads && counts.uploads > 0) {
    const items = demoUploads(targets.businessDate, counts.uploads);
    const bucket = alias(uploads, 'buckets', 'uploads');
    for (const item of items) {
      await targets.s3.send(new PutObjectCommand({ Bucket: bucket, Key: item.objectKey, Body: `demo upload ${item.uploadId}` }));
    }
    await putAll(documents, alias(uploads, 'tables', 'uploads'), items);
    result.uploadKeys = items.map((u) => u.objectKey);
  }

  const sessions = targets.jobs.get('expired-session-cleanup');
  if (sessions && counts.tenants > 0) {
    const maxAgeDays = Number(sessions.settings.sessionMaxAgeDays);
    if (!Number.isFinite(maxAgeDays)) throw new SeedError('job expired-session-cleanup has no numeric settings.sessionMaxAgeDays', sessions.jobName);
    const cutoff = new Date(Date.parse(`${targets.businessDate}T00:00:00.000Z`) - maxAgeDays * DAY_MS).toISOString();
    const tenants = demoTenants(counts.tenants);
    await putAll(documents, alias(sessions, 'tables', 'tenants'), tenants);
    const perTenant = counts.sessionsPerTenant ?? { expired: 3, active: 2 };
    const all = tenants.flatMap((t) => demoSessions(t.tenantId, cutoff, perTenant));
    await putAll(documents, alias(sessions, 'tables', 'sessions'), all);
    for (const s of all) {
      (Date.parse(s.lastSeenAt) < Date.parse(cutoff) ? result.expiredSessions : result.activeSessions).push(`${s.tenantId}/${s.sessionId}`);
    }
  }
  return result;
}
