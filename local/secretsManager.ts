// Secrets emulation: the smallest Secrets Manager JSON endpoint the jobs need (GetSecretValue, DescribeSecret,
// ListSecrets), serving the template's secrets. Hand-written because no npm package emulates Secrets Manager in-process.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { listenOnLoopback, type RunningServer } from './servers';

export interface LocalSecret {
  name: string;
  arn: string;
  value: string;
}

export class LocalSecretsManager {
  private readonly secrets: LocalSecret[] = [];
  private readonly versionId = randomUUID();

  add(secret: LocalSecret): void {
    this.secrets.push(secret);
  }

  /** By name, full ARN, or partial ARN (without the random suffix), as the real service accepts. */
  find(id: string): LocalSecret | undefined {
    return this.secrets.find((s) => s.name === id || s.arn === id || s.arn.startsWith(`${id}-`));
  }

  list(): LocalSecret[] {
    return [...this.secrets];
  }

  async start(port = 0): Promise<RunningServer> {
    const server = createServer((req, res) => {
      this.handle(req, res).catch((error: Error) =>
        reply(res, 500, { __type: 'InternalServiceError', message: error.message }),
      );
    });
    return listenOnLoopback(server, port);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const target = String(req.headers['x-amz-target'] ?? '');
    const action = target.split('.')[1];
    let body: { SecretId?: string };
    try {
      body = raw ? JSON.parse(raw) : {};
    } catch {
      return reply(res, 400, { __type: 'InvalidRequestException', message: 'request body is not JSON' });
    }
    const created = Math.floor(Date.now() / 1000);
    if (action === 'ListSecrets') {
      return reply(res, 200, {
        SecretList: this.secrets.map((s) => ({ ARN: s.arn, Name: s.name, CreatedDate: created })),
      });
    }
    if (action !== 'GetSecretValue' && action !== 'DescribeSecret') {
      return reply(res, 400, {
        __type: 'InvalidRequestException',
        message: `${target || 'this action'} is not emulated locally`,
      });
    }
    const secret = body.SecretId ? this.find(body.SecretId) : undefined;
    if (!secret) {
      return reply(res, 400, {
        __type: 'ResourceNotFoundException',
        message: "Secrets Manager can't find the specified secret.",
      });
    }
    if (action === 'DescribeSecret') {
      return reply(res, 200, {
        ARN: secret.arn,
        Name: secret.name,
        VersionIdsToStages: { [this.versionId]: ['AWSCURRENT'] },
      });
    }
    return reply(res, 200, {
      ARN: secret.arn,
      Name: secret.name,
      VersionId: this.versionId,
      SecretString: secret.value,
      VersionStages: ['AWSCURRENT'],
      CreatedDate: created,
    });
  }
}

function reply(res: ServerResponse, status: number, body: Record<string, unknown>): void {
  res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-requestid': randomUUID() });
  res.end(JSON.stringify(body));
}
