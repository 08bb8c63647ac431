// Where an operation's idempotency record lives: the consumer claims it, and operators (`op <operationId>`) look it up.
import { createHash } from 'node:crypto';

/**
 * The key prefix the consumer gives Powertools: the job name, rather than Powertools' default (the function name),
 * so a replaced or renamed function still finds every record its predecessor wrote.
 */
export function idempotencyKeyPrefix(jobName: string): string {
  return jobName;
}

/**
 * The `id` of the record Powertools writes for `operationId` (eventKeyJmesPath 'operationId', md5): the prefix, '#',
 * and the base64 md5 of the JSON-encoded key. Pinned against the installed Powertools by the consumer's tests.
 */
export function idempotencyRecordId(jobName: string, operationId: string): string {
  return `${idempotencyKeyPrefix(jobName)}#${createHash('md5').update(JSON.stringify(operationId)).digest('base64')}`;
}
