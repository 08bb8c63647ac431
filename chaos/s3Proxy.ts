// Chaos harness: a fault-injecting HTTP proxy in front of the local S3 server, for jobs whose effects land on S3. The
// functions' AWS_ENDPOINT_URL_S3 points here; a share of object writes and deletes is answered with S3's own XML error
// (503 SlowDown, the throttle S3 answers under load; 500 InternalError) instead of forwarded, so the request has no
// effect. Everything else is forwarded as it came (./forward.ts).
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeServer, objectRequestOf, type S3ObjectRequest } from '../local/servers';
import { forward, serveProxy } from './forward';

export type S3Fault = 'SlowDown' | 'InternalError';

export interface S3ProxyOptions {
  /** Where the S3 server listens; resolved per request (the proxy starts before the stack knows its endpoints). */
  target: () => string;
  /** Asked per object write or delete; a fault answers instead of S3. */
  decide: (request: S3ObjectRequest) => S3Fault | undefined;
}

const STATUS: Record<S3Fault, number> = { SlowDown: 503, InternalError: 500 };
const MESSAGE: Record<S3Fault, string> = {
  SlowDown: 'Please reduce your request rate. (injected)',
  InternalError: 'We encountered an internal error. Please try again. (injected)',
};

/** The body S3 answers an error with: the SDK reads the error's name from `Code`. */
export function s3ErrorBody(fault: S3Fault, requestId: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${fault}</Code><Message>${MESSAGE[fault]}</Message><RequestId>${requestId}</RequestId></Error>`;
}

export class S3FaultProxy {
  /** Faults answered, with the request each answered. */
  public readonly injected: ({ fault: S3Fault } & S3ObjectRequest)[] = [];
  public forwarded = 0;
  private server?: Server;

  constructor(private readonly options: S3ProxyOptions) {}

  get endpoint(): string {
    if (!this.server) throw new Error('the S3 fault proxy is not started');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async start(): Promise<string> {
    this.server = await serveProxy((req, body, res) => {
      const object = objectRequestOf(req.method, req.url);
      const fault = object && this.options.decide(object);
      if (object && fault) {
        this.injected.push({ fault, ...object });
        const requestId = `chaos-${this.injected.length}`;
        res.writeHead(STATUS[fault], { 'content-type': 'application/xml', 'x-amz-request-id': requestId });
        res.end(s3ErrorBody(fault, requestId));
        return;
      }
      this.forwarded++;
      forward(this.options.target, req, body, res);
    });
    return this.endpoint;
  }

  async close(): Promise<void> {
    if (this.server) await closeServer(this.server);
  }
}
