// Chaos harness: a fault-injecting HTTP proxy in front of dynalite. The functions' AWS_ENDPOINT_URL_DYNAMODB points
// here; some requests are answered with DynamoDB's own JSON errors (throttling, internal errors) instead of forwarded,
// and some are stalled: never answered, like a stuck connection, which the SDK (no request timeout by default) waits on
// until the Lambda timeout stops the invocation. What it lets through is forwarded as it came (./forward.ts).
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeServer } from '../local/servers';
import { forward, serveProxy } from './forward';

export type DynamoFault =
  | 'ProvisionedThroughputExceededException'
  | 'ThrottlingException'
  | 'InternalServerError'
  | 'Stall';

export interface DynamoProxyOptions {
  /** Where dynalite listens; resolved per request (the proxy starts before the stack knows its endpoints). */
  target: () => string;
  /** Asked per request with its X-Amz-Target operation; a fault answers instead of dynalite. */
  decide: (operation: string) => DynamoFault | undefined;
  /** How long a stalled request is held before the proxy gives up on it (the caller is normally gone by then). @default 120000 */
  stallMs?: number;
}

const STATUS: Record<Exclude<DynamoFault, 'Stall'>, number> = {
  ProvisionedThroughputExceededException: 400,
  ThrottlingException: 400,
  InternalServerError: 500,
};

/** The body DynamoDB answers an error with (AWS JSON 1.0): the SDK maps `__type` to its exception class. */
export function dynamoErrorBody(fault: Exclude<DynamoFault, 'Stall'>): string {
  const message =
    fault === 'InternalServerError'
      ? 'Internal server error (injected)'
      : 'The level of configured provisioned throughput for the table was exceeded (injected)';
  return JSON.stringify({ __type: `com.amazonaws.dynamodb.v20120810#${fault}`, message });
}

export class DynamoFaultProxy {
  /** Faults answered, by kind and operation. */
  public readonly injected: { fault: DynamoFault; operation: string }[] = [];
  public forwarded = 0;
  private server?: Server;
  private readonly stalled = new Set<ReturnType<typeof setTimeout>>();

  constructor(private readonly options: DynamoProxyOptions) {}

  get endpoint(): string {
    if (!this.server) throw new Error('the DynamoDB fault proxy is not started');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async start(): Promise<string> {
    this.server = await serveProxy((req, body, res) => {
      const operation =
        String(req.headers['x-amz-target'] ?? '')
          .split('.')
          .pop() ?? '';
      const fault = this.options.decide(operation);
      if (fault === 'Stall') {
        this.injected.push({ fault, operation });
        // Never answered while the caller waits; dropped after stallMs so a closing proxy has nothing left open.
        const timer = setTimeout(() => {
          this.stalled.delete(timer);
          res.destroy();
        }, this.options.stallMs ?? 120_000);
        this.stalled.add(timer);
        res.on('close', () => {
          clearTimeout(timer);
          this.stalled.delete(timer);
        });
        return;
      }
      if (fault) {
        this.injected.push({ fault, operation });
        res.writeHead(STATUS[fault], {
          'content-type': 'application/x-amz-json-1.0',
          'x-amzn-requestid': `chaos-${this.injected.length}`,
        });
        res.end(dynamoErrorBody(fault));
        return;
      }
      this.forwarded++;
      forward(this.options.target, req, body, res);
    });
    return this.endpoint;
  }

  async close(): Promise<void> {
    for (const timer of this.stalled) clearTimeout(timer);
    this.stalled.clear();
    if (this.server) await closeServer(this.server);
  }
}
