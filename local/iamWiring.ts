// IAM on the local stack: one place where the stack meets local/iam. It issues each role session its credentials,
// puts an auth gateway in front of every local server, decides the requests AWS's own services make for the stack
// in-process (Scheduler invoking its target), and keeps the denials for the run report.
import {
  Authorizer,
  CredentialDirectory,
  rolePrincipal,
  startAuthGateway,
  type AwsService,
  type Denial,
  type Principal,
  type SessionCredentials,
} from './iam';
import type { StackPlan } from './plan';
import { type ChannelForward, ensurePortFree, LOCAL_CREDENTIALS, type RunningServer } from './servers';

/** The access key a request is signed with (its caller's role session): what tells one function's requests apart. */
export { accessKeyOf } from './iam';

/** The local services, as the stack's endpoints name them. */
export type GatewayService = 'dynamodb' | 'sqs' | 's3' | 'secretsManager' | 'lambda' | 'scheduler';

const SERVICE_OF: Record<GatewayService, AwsService> = {
  dynamodb: 'dynamodb',
  sqs: 'sqs',
  s3: 's3',
  secretsManager: 'secretsmanager',
  lambda: 'lambda',
  scheduler: 'scheduler',
};

/** How the port-in-use message names each service. */
const LABEL: Record<GatewayService, string> = {
  dynamodb: 'DynamoDB',
  sqs: 'SQS',
  s3: 'S3',
  secretsManager: 'Secrets Manager',
  lambda: 'Lambda',
  scheduler: 'Scheduler',
};

export type IamDenial = Denial;

/** What a service acting with a role would get on AWS when the role may not do it: the call fails, naming both. */
export class AccessDeniedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AccessDeniedException';
  }
}

export interface StackIamOptions {
  accountId: string;
  region: string;
  /** false (`--no-iam`): everything passes, and what AWS would deny is still recorded. */
  enforce: boolean;
  log: (line: string) => void;
}

export class StackIam {
  private readonly credentials = new CredentialDirectory();
  private authorizer?: Authorizer;
  /**
   * What each gateway decides with. The gateways start before the plan exists (the plan's queue URLs name the SQS
   * gateway's port), and get the plan and the authorizer once it is made, before provisioning sends the first request.
   */
  private readonly gatewayOptions: { plan: StackPlan; authorizer: Authorizer }[] = [];

  constructor(private readonly options: StackIamOptions) {}

  get enforced(): boolean {
    return this.options.enforce;
  }

  /**
   * The credentials a role session signs with. A function without a role cannot exist on AWS (Role is required), so
   * no role falls back to the administrator's key only for a template the local runtime was handed half-made.
   */
  credentialsFor(roleArn: string | undefined, sessionName: string): SessionCredentials {
    if (!roleArn) {
      this.options.log(`${sessionName}: no role in the template; acting as the administrator`);
      return { ...LOCAL_CREDENTIALS, sessionToken: '' };
    }
    return this.credentials.forRole(roleArn, stsSessionName(sessionName));
  }

  /**
   * Starts a gateway in front of each server, on the port asked for (a free one when none); a server with an IPC
   * channel (channels) is forwarded to over it.
   */
  async startGateways(
    backends: Record<GatewayService, string>,
    ports: Partial<Record<GatewayService, number>>,
    channels: Partial<Record<GatewayService, ChannelForward>> = {},
  ): Promise<Record<GatewayService, RunningServer>> {
    const started: Partial<Record<GatewayService, RunningServer>> = {};
    try {
      for (const name of Object.keys(backends) as GatewayService[]) {
        const options = {
          service: SERVICE_OF[name],
          backendEndpoint: backends[name],
          backendChannel: channels[name],
          port: ports[name],
          credentials: this.credentials,
          // Set by usePlan before any request arrives.
          plan: undefined as unknown as StackPlan,
          authorizer: undefined as unknown as Authorizer,
        };
        this.gatewayOptions.push(options);
        // A port the user chose is the service's port (the gateway is what clients reach): name the service if taken.
        if (ports[name]) await ensurePortFree(ports[name]!, LABEL[name]);
        started[name] = await startAuthGateway(options);
      }
    } catch (error) {
      await Promise.allSettled(Object.values(started).map((s) => s.close()));
      throw error;
    }
    return started as Record<GatewayService, RunningServer>;
  }

  /** The template's IAM, from now on. */
  usePlan(plan: StackPlan): void {
    this.authorizer = new Authorizer({
      iam: plan.iam,
      accountId: plan.accountId,
      region: plan.region,
      enforce: this.options.enforce,
      onDenial: (d) => this.options.log(`${d.enforced ? 'DENIED' : 'would deny (--no-iam)'}: ${d.message}`),
    });
    for (const o of this.gatewayOptions) {
      o.plan = plan;
      o.authorizer = this.authorizer;
    }
  }

  /**
   * Decides a request AWS makes itself with a role (Scheduler invoking its target): nothing to forward, so it is
   * decided here, with the context keys the service sets.
   * @throws AccessDeniedError with AWS's message when the role may not
   */
  async require(request: {
    roleArn: string | undefined;
    sessionName: string;
    action: string;
    resource: string;
    sourceArn?: string;
  }): Promise<void> {
    if (!request.roleArn) return;
    await this.decide(
      rolePrincipal(request.roleArn, stsSessionName(request.sessionName)),
      request.action,
      request.resource,
      request.sourceArn,
    );
  }

  /**
   * A service assuming a role (Scheduler assuming a schedule's role): the role's trust policy decides, with the
   * source the service names, as STS does.
   * @throws AccessDeniedError with AWS's message when the trust policy does not let it
   */
  async requireAssume(request: { service: string; roleArn: string | undefined; sourceArn: string }): Promise<void> {
    if (!request.roleArn) return;
    await this.decide(
      { kind: 'service', service: request.service },
      'sts:AssumeRole',
      request.roleArn,
      request.sourceArn,
    );
  }

  /** One in-process decision, with the source context a service sets. @throws AccessDeniedError when denied */
  private async decide(
    principal: Principal,
    action: string,
    resource: string,
    sourceArn: string | undefined,
  ): Promise<void> {
    if (!this.authorizer) return;
    const decision = await this.authorizer.authorize({
      principal,
      action,
      resource,
      context: sourceArn ? { 'aws:SourceArn': sourceArn, 'aws:SourceAccount': this.options.accountId } : undefined,
    });
    if (!decision.allowed) throw new AccessDeniedError(decision.message ?? `${action} on ${resource} denied`);
  }

  /** Every request denied (or, not enforcing, that AWS would deny), oldest first. */
  denials(): IamDenial[] {
    return this.authorizer?.denials ?? [];
  }
}

/** STS session names are 2 to 64 of [\w+=,.@-]; a function or schedule name is, except past 64 characters. */
function stsSessionName(name: string): string {
  const cleaned = name.replace(/[^\w+=,.@-]/g, '-');
  return cleaned.length >= 2 ? cleaned.slice(0, 64) : `${cleaned}--`.slice(0, 2);
}
