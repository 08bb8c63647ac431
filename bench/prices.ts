// Benchmark (`npm run bench`), cost side: the us-east-1 list prices the per-job request counts are priced with.
// Prices as published by AWS for us-east-1 (standard queues, on-demand tables, Lambda requests and duration). They
// change rarely; when they do, this table is the one place to update, and the bench prints which prices it used.

export const US_EAST_1_PRICES = {
  /** SQS standard queue, per request (a request carries up to 10 messages / 256 KB; beyond the free tier). */
  sqsPerRequest: 0.4 / 1e6,
  /** Lambda, per invocation. */
  lambdaPerRequest: 0.2 / 1e6,
  /** Lambda duration per GB-second on arm64 (Graviton), the architecture the stack configures. x86_64: 0.0000166667. */
  lambdaPerGbSecondArm64: 0.0000133334,
  lambdaPerGbSecondX86: 0.0000166667,
  /** DynamoDB on-demand, per write request unit (1 KB) and read request unit (4 KB strongly consistent). */
  dynamoPerWriteUnit: 0.625 / 1e6,
  dynamoPerReadUnit: 0.125 / 1e6,
  /** EventBridge Scheduler, per invocation (one per producer run; beyond the free tier). */
  schedulerPerInvocation: 1.0 / 1e6,
} as const;

export type Architecture = 'arm64' | 'x86_64';

/** What one job costs in AWS requests, per job (averaged over a run). */
export interface PerJobUsage {
  sqsRequests: number;
  dynamoWriteUnits: number;
  dynamoReadUnits: number;
  lambdaInvocations: number;
  /** Lambda GB-seconds per job (billed duration times configured memory). */
  lambdaGbSeconds: number;
  /** Scheduler invocations per job (one per scheduled producer run, spread over its jobs). */
  schedulerInvocations: number;
}

export interface CostBreakdown {
  sqs: number;
  lambdaRequests: number;
  lambdaDuration: number;
  dynamodb: number;
  scheduler: number;
  total: number;
}

/** USD per `jobs` jobs (default one million) at the given usage per job. */
export function costFor(usage: PerJobUsage, architecture: Architecture = 'arm64', jobs = 1e6): CostBreakdown {
  const p = US_EAST_1_PRICES;
  const gbSecond = architecture === 'arm64' ? p.lambdaPerGbSecondArm64 : p.lambdaPerGbSecondX86;
  const sqs = usage.sqsRequests * p.sqsPerRequest * jobs;
  const lambdaRequests = usage.lambdaInvocations * p.lambdaPerRequest * jobs;
  const lambdaDuration = usage.lambdaGbSeconds * gbSecond * jobs;
  const dynamodb = (usage.dynamoWriteUnits * p.dynamoPerWriteUnit + usage.dynamoReadUnits * p.dynamoPerReadUnit) * jobs;
  const scheduler = usage.schedulerInvocations * p.schedulerPerInvocation * jobs;
  return {
    sqs,
    lambdaRequests,
    lambdaDuration,
    dynamodb,
    scheduler,
    total: sqs + lambdaRequests + lambdaDuration + dynamodb + scheduler,
  };
}
