// The job's local fixture (contract: local/fixture.ts): seeds uploads falling due across the business date (each
// object in the uploads bucket, then its record) and reads the job's effects off the S3 deletes the local servers
// answered. Local tooling only, never bundled into a function.
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { putItems, resourceName, tally } from '../../../local/fixture';
import type { EffectReading, EffectsInput, FixtureContext, JobFixture, SeededDemo } from '../../../local/fixture';
import { resourceSchema } from './index';
import { demoUploads } from './items';

// Operation keys are object keys in the uploads bucket: an S3 delete names only bucket and key, and a message's
// resource names the object key but not the bucket (the job has one), so this is what both sides can say.

export const fixture: JobFixture = {
  unit: 'uploads',
  defaultCount: 40,

  async seed(ctx: FixtureContext, count: number): Promise<SeededDemo> {
    const table = resourceName(ctx.settings, 'tables', 'uploads');
    const bucket = resourceName(ctx.settings, 'buckets', 'uploads');
    const items = demoUploads(ctx.businessDate, count);
    // Objects first: a record the job discovers always has its object to delete.
    for (const item of items) {
      await ctx.s3.send(
        new PutObjectCommand({ Bucket: bucket, Key: item.objectKey, Body: `demo upload ${item.uploadId}` }),
      );
    }
    await putItems(ctx.documents, ctx.jobName, table, items);
    return { expectedOperations: items.map((u) => u.objectKey), summary: `${items.length} uploads` };
  },

  /**
   * Deletes per object in the uploads bucket; each delete is a start. A delete of an object not seeded, or in another
   * of the job's buckets, is an effect the run must not have made. Throttles are AWS's, which only the consumer sees.
   */
  effects({ settings, seeded, writes }: EffectsInput): EffectReading {
    const uploads = settings.buckets.uploads;
    const buckets = new Set(Object.values(settings.buckets));
    const deletes = writes.filter((w) => w.service === 's3' && w.action === 'DeleteObject' && buckets.has(w.resource));
    const expected = new Set(seeded.expectedOperations);
    const ours = deletes.filter((d) => d.resource === uploads);
    return {
      effectsByOperation: tally(ours.map((d) => d.key.key)),
      starts: deletes.map((d) => d.at),
      throttled: undefined,
      unexpectedEffects: deletes
        .filter((d) => d.resource !== uploads || !expected.has(d.key.key))
        .map((d) => `${d.resource}/${d.key.key}`),
    };
  },

  operationKeyOf(resource: Record<string, unknown>): string | undefined {
    const parsed = resourceSchema.safeParse(resource);
    return parsed.success ? parsed.data.objectKey : undefined;
  },
};
