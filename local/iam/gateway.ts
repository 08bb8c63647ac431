// IAM enforcement, step four: the gate. An HTTP proxy in front of one local AWS-protocol server: it reads who signed a
// request (the SigV4 access key), what the request needs (requests.ts), asks the authorizer, and either forwards the
// request unchanged or answers the service's own access-denied error, so the SDK in a function raises what it would
// raise on AWS. Signatures are not verified: the key names the caller, as every local process is trusted to sign only
// with the credentials it was given.
import { Agent, createServer, type IncomingMessage, request as httpRequest, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { type ChannelForward, LOCAL_CREDENTIALS, listenOnLoopback, type RunningServer } from '../servers';
import type { Authorizer } from './authorizer';
import type { CredentialDirectory, Principal } from './credentials';
import {
  type AwsService,
  describeRequest,
  isSqsJsonRequest,
  type RequestDescription,
  RequestDescriptionError,
  type RequestPlan,
  requestNeedsBody,
} from './requests';

export interface AuthGatewayOptions {
  service: AwsService;
  /** The server it guards, e.g. http://127.0.0.1:43123. */
  backendEndpoint: string;
  /**
   * The server's IPC channel (RunningServer.forward), when it has one: requests are forwarded over it instead of over
   * HTTP to backendEndpoint. Each forwarded request otherwise costs an HTTP client here and an HTTP server there, for
   * every DynamoDB request of every function, and this process and the server share two cores with the functions.
   */
  backendChannel?: ChannelForward;
  /** 0 picks a free port. @default 0 */
  port?: number;
  /**
   * The plan naming the stack's resources, or a getter for it: queue URLs name the gateway's port, so the plan is
   * made after the gateway listens; a getter is read at each request.
   */
  plan: RequestPlan | (() => RequestPlan);
  /** The authorizer, or a getter for it (built from the plan, so possibly after the gateway starts). */
  authorizer: Authorizer | (() => Authorizer);
  credentials: CredentialDirectory;
}

/**
 * A request with this header is decided as if it came over plain HTTP (aws:SecureTransport false): what AWS would
 * decide for a client that skipped TLS. Everything else is taken as TLS, as a function's calls are on AWS.
 */
export const TRANSPORT_HEADER = 'x-local-transport';

type Failure = 'denied' | 'invalid-key' | 'missing-key' | 'bad-request' | 'backend-down';

const CREDENTIAL = /Credential=([^/,\s]+)\//;

/** The access key a request is signed with: the Authorization header's Credential, or a presigned URL's. */
export function accessKeyOf(req: { headers: IncomingMessage['headers']; url?: string }): string | undefined {
  const auth = req.headers.authorization;
  if (auth) return CREDENTIAL.exec(auth)?.[1];
  const query = (req.url ?? '').split('?')[1];
  const credential = query ? new URLSearchParams(query).get('X-Amz-Credential') : null;
  return credential ? credential.split('/')[0] : undefined;
}

export async function startAuthGateway(options: AuthGatewayOptions): Promise<RunningServer> {
  const backend = new URL(options.backendEndpoint);
  const agent = new Agent({ keepAlive: true });
  const server = createServer((req, res) => {
    handle(req, res).catch((error: Error) =>
      fail(res, options.service, req, 'backend-down', `local IAM gateway for ${options.service}: ${error.message}`),
    );
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { service, credentials } = options;
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const accessKey = accessKeyOf(req);
    if (!accessKey) {
      await drain(req);
      return fail(
        res,
        service,
        req,
        'missing-key',
        service === 's3' ? 'Access Denied' : 'Request is missing Authentication Token',
      );
    }
    const principal = credentials.principalOf(accessKey);
    if (!principal) {
      await drain(req);
      const message =
        service === 's3'
          ? 'The AWS Access Key Id you provided does not exist in our records.'
          : 'The security token included in the request is invalid.';
      return fail(res, service, req, 'invalid-key', message);
    }
    // The administrator's requests are never described, so only a role's request body is read here (and any body that
    // goes over a channel, which takes it whole).
    const body =
      options.backendChannel || (principal.kind !== 'admin' && requestNeedsBody(service, method, url))
        ? await read(req)
        : undefined;
    if (principal.kind !== 'admin') {
      const denied = await authorize(options, principal, req, body);
      if (denied) {
        if (body === undefined) await drain(req);
        return fail(res, service, req, denied.failure, denied.message);
      }
    }
    forward(options, { backend, agent }, req, res, body);
  }

  const running = await listenOnLoopback(server, options.port ?? 0);
  return {
    ...running,
    async close() {
      agent.destroy();
      await running.close();
    },
  };
}

/** Why a role's request is refused (the first permission the policies refuse, as AWS answers), or undefined. */
async function authorize(
  options: AuthGatewayOptions,
  principal: Principal,
  req: IncomingMessage,
  body: Buffer | undefined,
): Promise<{ failure: Failure; message: string } | undefined> {
  const plan = typeof options.plan === 'function' ? options.plan() : options.plan;
  const authorizer = typeof options.authorizer === 'function' ? options.authorizer() : options.authorizer;
  if (!plan || !authorizer) {
    throw new Error(
      'a role signed a request before the stack was planned: there is no plan or authorizer to decide it with',
    );
  }
  let description: RequestDescription;
  try {
    description = describeRequest(
      options.service,
      { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, body },
      plan,
    );
  } catch (error) {
    if (error instanceof RequestDescriptionError) return { failure: 'bad-request', message: error.message };
    throw error;
  }
  const secureTransport = req.headers[TRANSPORT_HEADER] !== 'http';
  // Every permission is checked, so that a run without enforcement reports each one AWS would refuse; the first
  // refusal is the one answered, as AWS stops at the first failed authorization.
  let refused: string | undefined;
  for (const p of description.permissions) {
    const decision = await authorizer.authorize({
      principal,
      action: p.action,
      resource: p.resource,
      context: p.context,
      secureTransport,
    });
    if (!decision.allowed && refused === undefined) refused = decision.message;
  }
  return refused === undefined ? undefined : { failure: 'denied', message: refused };
}

/** Passes an allowed request on to the server: over its channel when it has one and the body is read, else by HTTP. */
function forward(
  options: AuthGatewayOptions,
  to: { backend: URL; agent: Agent },
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer | undefined,
): void {
  const { backend, agent } = to;
  const headers = { ...req.headers };
  // Hop-by-hop headers stay here; the gateway's own header is no AWS header.
  for (const h of ['connection', 'keep-alive', 'expect', TRANSPORT_HEADER]) delete headers[h];
  let path = req.url ?? '/';
  if (options.service === 's3') {
    // s3rver checks the access key (it must be its own) but not the signature.
    if (headers.authorization)
      headers.authorization = headers.authorization.replace(CREDENTIAL, `Credential=${LOCAL_CREDENTIALS.accessKeyId}/`);
    path = path.replace(/([?&]X-Amz-Credential=)[^%&/]+/, `$1${LOCAL_CREDENTIALS.accessKeyId}`);
  }
  if (body !== undefined) {
    delete headers['transfer-encoding'];
    headers['content-length'] = String(body.length);
  }
  if (options.backendChannel && body !== undefined) {
    options.backendChannel({ method: req.method ?? 'GET', url: path, headers, body: body.toString('utf8') }).then(
      (answer) => {
        res.writeHead(answer.status, answer.headers);
        res.end(req.method === 'HEAD' ? undefined : answer.body);
      },
      (error: Error) =>
        fail(
          res,
          options.service,
          req,
          'backend-down',
          `local IAM gateway could not reach the ${options.service} server over its channel: ${error.message}`,
        ),
    );
    return;
  }
  const upstream = httpRequest(
    { host: backend.hostname, port: backend.port, method: req.method, path, headers, agent },
    (answer) => {
      const answerHeaders = { ...answer.headers };
      delete answerHeaders.connection;
      delete answerHeaders['keep-alive'];
      res.writeHead(answer.statusCode ?? 502, answerHeaders);
      answer.pipe(res);
    },
  );
  upstream.on('error', (error) =>
    fail(
      res,
      options.service,
      req,
      'backend-down',
      `local IAM gateway could not reach the ${options.service} server at ${options.backendEndpoint}: ${error.message}`,
    ),
  );
  if (body !== undefined) upstream.end(body);
  else req.pipe(upstream);
}

function read(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

/** Reads and drops a body the gateway answers without forwarding, so the connection can be reused. */
function drain(req: IncomingMessage): Promise<void> {
  if (req.readableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    req.on('end', resolve);
    req.on('error', () => resolve());
    req.resume();
  });
}

interface ErrorShape {
  status: number;
  code: string;
}

/** Each service's own errors, as its SDK client parses them (the codes and statuses AWS answers with). */
const ERRORS: Record<AwsService, Record<Failure, ErrorShape>> = {
  dynamodb: {
    denied: { status: 400, code: 'AccessDeniedException' },
    'invalid-key': { status: 400, code: 'UnrecognizedClientException' },
    'missing-key': { status: 400, code: 'MissingAuthenticationTokenException' },
    'bad-request': { status: 400, code: 'ValidationException' },
    'backend-down': { status: 500, code: 'InternalServerError' },
  },
  // SQS over its JSON protocol. AWS's query-compatible code for a denial is AccessDenied; the SDK names the error after
  // an x-amzn-query-error header when one is sent, so none is sent for the denial and the error is named after its
  // __type, AccessDeniedException. The query protocol (XML) answers AccessDenied.
  sqs: {
    denied: { status: 403, code: 'AccessDeniedException' },
    'invalid-key': { status: 403, code: 'InvalidClientTokenId' },
    'missing-key': { status: 403, code: 'MissingClientTokenId' },
    'bad-request': { status: 400, code: 'InvalidParameterValue' },
    'backend-down': { status: 500, code: 'InternalFailure' },
  },
  s3: {
    denied: { status: 403, code: 'AccessDenied' },
    'invalid-key': { status: 403, code: 'InvalidAccessKeyId' },
    'missing-key': { status: 403, code: 'AccessDenied' },
    'bad-request': { status: 400, code: 'InvalidRequest' },
    'backend-down': { status: 500, code: 'InternalError' },
  },
  secretsmanager: {
    denied: { status: 400, code: 'AccessDeniedException' },
    'invalid-key': { status: 400, code: 'UnrecognizedClientException' },
    'missing-key': { status: 400, code: 'MissingAuthenticationTokenException' },
    'bad-request': { status: 400, code: 'InvalidRequestException' },
    'backend-down': { status: 500, code: 'InternalServiceError' },
  },
  lambda: {
    denied: { status: 403, code: 'AccessDeniedException' },
    'invalid-key': { status: 403, code: 'UnrecognizedClientException' },
    'missing-key': { status: 403, code: 'MissingAuthenticationTokenException' },
    'bad-request': { status: 400, code: 'InvalidParameterValueException' },
    'backend-down': { status: 500, code: 'ServiceException' },
  },
  scheduler: {
    denied: { status: 403, code: 'AccessDeniedException' },
    'invalid-key': { status: 403, code: 'UnrecognizedClientException' },
    'missing-key': { status: 403, code: 'MissingAuthenticationTokenException' },
    'bad-request': { status: 400, code: 'ValidationException' },
    'backend-down': { status: 500, code: 'InternalServerException' },
  },
};

/** The query protocol's codes where they differ from the JSON protocol's. */
const SQS_QUERY_CODES: Partial<Record<Failure, string>> = { denied: 'AccessDenied' };

const escapeXml = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function fail(res: ServerResponse, service: AwsService, req: IncomingMessage, failure: Failure, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { status, code } = ERRORS[service][failure];
  const requestId = randomUUID();
  const send = (contentType: string, body: string, extra: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': contentType, 'x-amzn-requestid': requestId, ...extra });
    // A HEAD answer has no body; the SDK reads the error from the status alone, as on AWS.
    res.end(req.method === 'HEAD' ? undefined : body);
  };
  switch (service) {
    case 'dynamodb':
    case 'secretsmanager': {
      const prefix = service === 'dynamodb' ? 'com.amazon.coral.service#' : '';
      const contentType = service === 'dynamodb' ? 'application/x-amz-json-1.0' : 'application/x-amz-json-1.1';
      return send(contentType, JSON.stringify({ __type: `${prefix}${code}`, message }));
    }
    case 'sqs': {
      if (isSqsJsonRequest(req.headers)) {
        const queryError: Record<string, string> =
          failure === 'denied' ? {} : { 'x-amzn-query-error': `${code};Sender` };
        return send(
          'application/x-amz-json-1.0',
          JSON.stringify({ __type: `com.amazon.coral.service#${code}`, message }),
          queryError,
        );
      }
      const queryCode = SQS_QUERY_CODES[failure] ?? code;
      return send(
        'text/xml',
        `<?xml version="1.0"?><ErrorResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><Error><Type>Sender</Type><Code>${queryCode}</Code><Message>${escapeXml(message)}</Message><Detail/></Error><RequestId>${requestId}</RequestId></ErrorResponse>`,
      );
    }
    case 's3':
      return send(
        'application/xml',
        `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${escapeXml(message)}</Message><RequestId>${requestId}</RequestId><HostId>local</HostId></Error>`,
      );
    case 'lambda':
    case 'scheduler':
      return send('application/json', JSON.stringify({ Type: 'User', Message: message, message }), {
        'x-amzn-errortype': code,
      });
  }
}
