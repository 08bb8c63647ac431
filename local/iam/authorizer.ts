// IAM enforcement, step three: the decision. Evaluates one (principal, action, resource) against the template's
// identity policies and the resource's own policy, with the context keys AWS would set, using @cloud-copilot/iam-simulate
// (identity and resource policies, same-account rules, explicit deny, every condition operator, KMS key-policy trust).
//
// What it leaves to us, handled here: it sets no context keys itself (aws:SecureTransport, aws:PrincipalArn, aws:userid,
// ... are filled in below), and it knows nothing of the template, so the role's policies and the resource's policy are
// looked up here. Not handled: kms:EncryptionContext:<key> conditions (the simulator drops such keys as unknown for the
// action, so a key policy conditioned on them denies) and aws:PrincipalTag/* (PlannedRole carries no tags); the
// template uses neither.
import {
  runSimulation,
  type RequestAnalysis,
  type RunSimulationResults,
  type Simulation,
} from '@cloud-copilot/iam-simulate';
import type { PlannedIam, PlannedRole, PolicyDocument } from '../plan';
import type { Principal } from './credentials';

export interface AuthorizerOptions {
  iam: PlannedIam;
  accountId: string;
  region: string;
  /** false: allow everything, but still record (and report) what AWS would deny. @default true */
  enforce?: boolean;
  /** Called with every denial (also the would-be denials when not enforcing). */
  onDenial?: (denial: Denial) => void;
  /** How many denials `denials` keeps (the most recent); `denialCount` counts them all. @default 1000 */
  maxDenials?: number;
  /** Distinct decisions kept in the cache. @default 20000 */
  maxCachedDecisions?: number;
  /** The clock for aws:CurrentTime and for `Denial.at`. @default () => new Date() */
  now?: () => Date;
}

export interface AuthorizationRequest {
  principal: Principal;
  action: string;
  resource: string;
  /** Context keys the caller knows (aws:SourceArn, aws:SourceAccount, kms:ViaService, ...). */
  context?: Record<string, string | string[]>;
  /** false for a request that came over plain HTTP (aws:SecureTransport). A call from a function is TLS on AWS. @default true */
  secureTransport?: boolean;
}

/**
 * Why AWS denies: nothing allows it (`no-identity-allow`; `no-resource-allow` where the service wants the resource's
 * policy to allow, as a KMS key policy must), an explicit deny, or a request the evaluator could not evaluate.
 */
export type DenialReason =
  | 'no-identity-allow'
  | 'no-resource-allow'
  | 'explicit-deny-identity'
  | 'explicit-deny-resource'
  | 'not-evaluable';

export interface Decision {
  /** Whether the request may go on (always true when not enforcing). */
  allowed: boolean;
  /** AWS would deny it (when not enforcing, `allowed` is still true). */
  wouldDeny: boolean;
  reason?: DenialReason;
  /** AWS's own wording: "User: <arn> is not authorized to perform: <action> on resource: <arn> because ...". */
  message?: string;
  /** What the local evaluation could not know (e.g. AWS managed policies of the role). */
  note?: string;
}

export interface Denial {
  at: number;
  /** The assumed-role ARN (or the service) that was denied. */
  principalArn: string;
  roleArn?: string;
  sessionName?: string;
  action: string;
  resource: string;
  reason: DenialReason;
  message: string;
  note?: string;
  /** false: recorded while not enforcing (the request went through). */
  enforced: boolean;
}

interface Evaluated {
  allowed: boolean;
  reason?: DenialReason;
  /**
   * Why, after AWS's "User: <caller> is not authorized to perform: <action> on resource: <resource> ": the message is
   * made per request, so a decision shared by many resources (S3 objects, below) names each one's own.
   */
  because?: string;
  note?: string;
}

const TIME_KEYS = /aws:(CurrentTime|EpochTime)/i;

const documentOf = (doc: PolicyDocument) => ({ Version: doc.Version ?? '2012-10-17', Statement: doc.Statement });

/** The account of an ARN (S3 ARNs have none: a bucket belongs to the stack's account here). */
function accountOf(arn: string, fallback: string): string {
  const account = arn.split(':')[4];
  return account && /^\d{12}$/.test(account) ? account : fallback;
}

/** The ARN a resource policy is kept under: objects under their bucket, qualified functions and indexes under their own. */
function policyOwner(resource: string): string {
  if (resource.startsWith('arn:aws:s3:::')) return resource.replace(/^(arn:aws:s3:::[^/]+).*$/, '$1');
  if (resource.includes(':lambda:') && resource.includes(':function:'))
    return resource.replace(/^(arn:[^:]+:lambda:[^:]+:\d+:function:[^:]+).*$/, '$1');
  if (resource.includes(':dynamodb:')) return resource.replace(/^(arn:[^:]+:dynamodb:[^:]+:\d+:table\/[^/]+).*$/, '$1');
  return resource;
}

export class Authorizer {
  /** The most recent denials (see maxDenials), oldest first. */
  readonly denials: Denial[] = [];
  /** Every denial so far. */
  denialCount = 0;

  private readonly roles = new Map<string, PlannedRole>();
  private readonly resourcePolicies = new Map<string, PolicyDocument>();
  private readonly cache = new Map<string, Promise<Evaluated>>();
  /** Per role (or service) and bucket: the policy patterns an object ARN is classed by, or undefined where it cannot be. */
  private readonly objectPatterns = new Map<string, RegExp[] | undefined>();
  /** Per role: the dynamodb:LeadingKeys patterns of its policies, or undefined where they cannot be classed. */
  private readonly leadingKeyPatterns = new Map<string, RegExp[] | undefined>();
  private readonly enforce: boolean;
  private readonly maxDenials: number;
  private readonly maxCached: number;
  private readonly now: () => Date;
  // A policy that compares the clock must see the time of each request, so its decisions are not cached.
  private readonly timeSensitive: boolean;

  constructor(private readonly options: AuthorizerOptions) {
    for (const role of options.iam.roles) this.roles.set(role.arn, role);
    for (const policy of options.iam.resourcePolicies) this.resourcePolicies.set(policy.resourceArn, policy.document);
    this.enforce = options.enforce ?? true;
    this.maxDenials = options.maxDenials ?? 1000;
    this.maxCached = options.maxCachedDecisions ?? 20000;
    this.now = options.now ?? (() => new Date());
    this.timeSensitive = TIME_KEYS.test(JSON.stringify(options.iam));
  }

  get enforcing(): boolean {
    return this.enforce;
  }

  async authorize(request: AuthorizationRequest): Promise<Decision> {
    const { principal } = request;
    if (principal.kind === 'admin') return { allowed: true, wouldDeny: false };
    const evaluated = await this.evaluate(request);
    if (evaluated.allowed) return { allowed: true, wouldDeny: false };
    const callerArn = principal.kind === 'role' ? principal.assumedRoleArn : principal.service;
    const message = `User: ${callerArn} is not authorized to perform: ${request.action} on resource: ${request.resource} ${evaluated.because}`;
    const denial: Denial = {
      at: this.now().getTime(),
      principalArn: callerArn,
      ...(principal.kind === 'role' ? { roleArn: principal.roleArn, sessionName: principal.sessionName } : {}),
      action: request.action,
      resource: request.resource,
      reason: evaluated.reason!,
      message,
      ...(evaluated.note ? { note: evaluated.note } : {}),
      enforced: this.enforce,
    };
    this.denialCount++;
    this.denials.push(denial);
    if (this.denials.length > this.maxDenials) this.denials.shift();
    this.options.onDenial?.(denial);
    return {
      allowed: !this.enforce,
      wouldDeny: true,
      reason: evaluated.reason,
      message,
      ...(evaluated.note ? { note: evaluated.note } : {}),
    };
  }

  private evaluate(request: AuthorizationRequest): Promise<Evaluated> {
    if (this.timeSensitive) return this.simulate(request);
    const p = request.principal;
    const who = p.kind === 'role' ? `${p.roleArn}\n${p.sessionName}` : p.kind === 'service' ? p.service : '';
    const context = request.context
      ? JSON.stringify(Object.entries(this.contextClass(request)).sort(([a], [b]) => (a < b ? -1 : 1)))
      : '';
    const key = `${who}\n${request.action}\n${this.objectClass(request) ?? request.resource}\n${request.secureTransport === false ? 0 : 1}\n${context}`;
    let decided = this.cache.get(key);
    if (!decided) {
      decided = this.simulate(request);
      // Decisions for one stack are few (roles x actions x resources), but S3 object keys are unbounded.
      if (this.cache.size >= this.maxCached) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(key, decided);
      decided.catch(() => this.cache.delete(key));
    }
    return decided;
  }

  /**
   * The request's context with dynamodb:LeadingKeys replaced by its class, for the cache key. Every item key is a value
   * of its own (an idempotency record's ID is a hash), so without classes each request on a shared state table would
   * be simulated afresh. The simulator sees the values only through the role's LeadingKeys patterns, so values that
   * match the same patterns decide alike: the class is the set of match vectors. Raw values where a pattern might not
   * be read as the simulator does (a policy variable, an operator other than StringLike/StringEquals).
   */
  private contextClass(request: AuthorizationRequest): Record<string, string | string[]> {
    const values = request.context?.['dynamodb:LeadingKeys'];
    if (values === undefined || request.principal.kind !== 'role') return request.context ?? {};
    const roleArn = request.principal.roleArn;
    if (!this.leadingKeyPatterns.has(roleArn)) {
      this.leadingKeyPatterns.set(
        roleArn,
        leadingKeyPatternsOf(this.roles.get(roleArn)?.policies.map((p) => p.document) ?? []),
      );
    }
    const patterns = this.leadingKeyPatterns.get(roleArn);
    if (!patterns) return request.context!;
    const vectors = [
      ...new Set([values].flat().map((v) => patterns.map((re) => (re.test(v) ? '1' : '0')).join(''))),
    ].sort();
    return { ...request.context, 'dynamodb:LeadingKeys': vectors.map((v) => `<class ${v}>`) };
  }

  /**
   * An S3 object ARN's decision class: its bucket and which of the policies' resource patterns it matches. Every object
   * key is a resource of its own, so without classes each object a function touches would be simulated afresh (about
   * a millisecond each). The simulator sees an object's key only through the resource patterns of the caller's
   * policies and the bucket's policy (an object is an object whatever its key), so two objects that match the same
   * patterns get the same decision. Matched both case-sensitively and not, so the class is at least as fine as the
   * simulator's own matching; undefined (each object its own decision) for anything else: a key or a pattern the
   * simple reading below might not read as the simulator does (a colon, a policy variable, a wildcard before the
   * resource part).
   */
  private objectClass(request: AuthorizationRequest): string | undefined {
    const match = /^arn:aws:s3:::([^/:*?$]+)\/([^:*?$]+)$/.exec(request.resource);
    if (!match) return undefined;
    const p = request.principal;
    const owner = p.kind === 'role' ? p.roleArn : p.kind === 'service' ? p.service : '';
    const bucketArn = `arn:aws:s3:::${match[1]}`;
    const patternsKey = `${owner}\n${bucketArn}`;
    if (!this.objectPatterns.has(patternsKey)) {
      const role = p.kind === 'role' ? this.roles.get(p.roleArn) : undefined;
      const documents = [
        ...(role?.policies ?? []).map((policy) => policy.document),
        this.resourcePolicies.get(bucketArn),
      ].filter((d) => d !== undefined);
      this.objectPatterns.set(patternsKey, objectPatternsOf(documents));
    }
    const patterns = this.objectPatterns.get(patternsKey);
    if (!patterns) return undefined;
    return `${bucketArn}/<object ${patterns.map((re) => (re.test(request.resource) ? '1' : '0')).join('')}>`;
  }

  private async simulate(request: AuthorizationRequest): Promise<Evaluated> {
    const { principal, action, resource } = request;
    if (principal.kind === 'admin') return { allowed: true };
    const { accountId, region } = this.options;
    const now = this.now();
    const role = principal.kind === 'role' ? this.roles.get(principal.roleArn) : undefined;
    const callerArn = principal.kind === 'role' ? principal.assumedRoleArn : principal.service;

    const context: Record<string, string | string[]> = {
      'aws:SecureTransport': request.secureTransport === false ? 'false' : 'true',
      'aws:CurrentTime': now.toISOString(),
      'aws:EpochTime': String(Math.floor(now.getTime() / 1000)),
      'aws:RequestedRegion': region,
      'aws:ViaAWSService': 'false',
    };
    if (principal.kind === 'role') {
      const roleAccount = accountOf(principal.roleArn, accountId);
      // The role's unique ID: local/plan.ts gives a template role the RoleId `LOCAL<logicalId>` (Fn::GetAtt RoleId).
      const roleId = role ? `LOCAL${role.logicalId}` : `LOCAL${principal.roleArn.split('/').pop()}`;
      Object.assign(context, {
        'aws:PrincipalArn': principal.roleArn,
        'aws:PrincipalAccount': roleAccount,
        'aws:PrincipalType': 'AssumedRole',
        'aws:userid': `${roleId}:${principal.sessionName}`,
        'aws:PrincipalIsAWSService': 'false',
      });
    } else {
      Object.assign(context, { 'aws:PrincipalServiceName': principal.service, 'aws:PrincipalIsAWSService': 'true' });
    }
    Object.assign(context, request.context);

    // A role's trust policy is the resource policy of sts:AssumeRole on it.
    const resourcePolicy =
      action.toLowerCase() === 'sts:assumerole'
        ? this.roles.get(resource)?.trustPolicy
        : this.resourcePolicies.get(policyOwner(resource));
    const simulation: Simulation = {
      request: {
        principal: callerArn,
        action,
        resource: {
          resource,
          accountId: accountOf(
            resource,
            principal.kind === 'role' ? accountOf(principal.roleArn, accountId) : accountId,
          ),
        },
        contextVariables: context,
      },
      identityPolicies: (role?.policies ?? []).map((p) => ({ name: p.name, policy: documentOf(p.document) })),
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      ...(resourcePolicy ? { resourcePolicy: documentOf(resourcePolicy) } : {}),
    };
    const note =
      role && role.externalManagedPolicyArns.length > 0
        ? `the role's AWS managed policies (${role.externalManagedPolicyArns.join(', ')}) are not known locally and grant nothing here`
        : undefined;
    const result = await runSimulation(simulation, {});
    return { ...judge(result, callerArn, action), ...(note ? { note } : {}) };
  }
}

/**
 * The dynamodb:LeadingKeys patterns of these documents' conditions, as expressions (IAM's wildcards for StringLike, the
 * literal for StringEquals), for classing the values; undefined for any other operator on the key or a policy variable.
 */
function leadingKeyPatternsOf(documents: PolicyDocument[]): RegExp[] | undefined {
  const patterns: RegExp[] = [];
  for (const document of documents) {
    for (const statement of [document.Statement].flat()) {
      for (const [operator, keys] of Object.entries(
        (statement.Condition ?? {}) as Record<string, Record<string, unknown>>,
      )) {
        for (const [key, value] of Object.entries(keys)) {
          if (key.toLowerCase() !== 'dynamodb:leadingkeys') continue;
          const like = /^(ForAllValues:|ForAnyValue:)?StringLike$/.test(operator);
          if (!like && !/^(ForAllValues:|ForAnyValue:)?StringEquals$/.test(operator)) return undefined;
          for (const pattern of [value].flat()) {
            if (typeof pattern !== 'string' || pattern.includes('${')) return undefined;
            const escaped = pattern.replace(/[.+^${}()|[\]\\*?]/g, (c) =>
              like && c === '*' ? '.*' : like && c === '?' ? '.' : `\\${c}`,
            );
            patterns.push(new RegExp(`^${escaped}$`, 's'));
          }
        }
      }
    }
  }
  return patterns;
}

/**
 * The resource patterns of these policy documents, each as two expressions (IAM's wildcards, case-sensitive and not),
 * for classing S3 object ARNs; undefined when a pattern could match an object ARN in a way this reading might not
 * follow: a wildcard before the resource part, a colon in it, a policy variable anywhere, or a pattern not a string.
 */
function objectPatternsOf(documents: PolicyDocument[]): RegExp[] | undefined {
  if (documents.some((d) => JSON.stringify(d).includes('${'))) return undefined;
  const patterns: RegExp[] = [];
  for (const document of documents) {
    for (const statement of [document.Statement].flat()) {
      for (const field of ['Resource', 'NotResource']) {
        const value = statement[field];
        if (value === undefined) continue;
        for (const pattern of [value].flat() as unknown[]) {
          if (typeof pattern !== 'string') return undefined;
          if (pattern === '*') continue;
          const head = pattern.split(':').slice(0, 5).join(':');
          if (/[*?]/.test(head)) return undefined;
          if (head !== 'arn:aws:s3::') continue;
          const rest = pattern.split(':').slice(5).join(':');
          if (rest.includes(':')) return undefined;
          const source = `^${(head + ':' + rest)
            .replace(/[.+^${}()|[\]\\]/g, '\\$&')
            .replace(/\?/g, '.')
            .replace(/\*/g, '.*')}$`;
          patterns.push(new RegExp(source), new RegExp(source, 'i'));
        }
      }
    }
  }
  return patterns;
}

function judge(result: RunSimulationResults, caller: string, action: string): Evaluated {
  if (result.resultType === 'error') {
    return {
      allowed: false,
      reason: 'not-evaluable',
      because: `because the local IAM evaluator could not evaluate the request: ${describeErrors(result.errors)}`,
    };
  }
  if (result.overallResult === 'Allowed') return { allowed: true };
  const analyses: RequestAnalysis[] =
    result.resultType === 'single' ? [result.result.analysis] : result.results.map((r) => r.analysis);
  if (result.overallResult === 'ExplicitlyDenied') {
    const inIdentity = analyses.some((a) => a.identityAnalysis?.result === 'ExplicitlyDenied');
    return inIdentity
      ? {
          allowed: false,
          reason: 'explicit-deny-identity',
          because: 'with an explicit deny in an identity-based policy',
        }
      : {
          allowed: false,
          reason: 'explicit-deny-resource',
          because: 'with an explicit deny in a resource-based policy',
        };
  }
  // Allowed by the identity policies and still denied: the service wants the resource's own policy to allow it (a
  // KMS key policy that does not trust the account, a service principal).
  const identityAllowed = analyses.some((a) => a.identityAnalysis?.result === 'Allowed');
  const servicePrincipal = caller.endsWith('.amazonaws.com');
  return identityAllowed || servicePrincipal
    ? {
        allowed: false,
        reason: 'no-resource-allow',
        because: `because no resource-based policy allows the ${action} action`,
      }
    : {
        allowed: false,
        reason: 'no-identity-allow',
        because: `because no identity-based policy allows the ${action} action`,
      };
}

function describeErrors(errors: Extract<RunSimulationResults, { resultType: 'error' }>['errors']): string {
  const parts: string[] = [errors.message];
  const named = {
    ...errors.identityPolicyErrors,
    ...(errors.resourcePolicyErrors ? { 'resource policy': errors.resourcePolicyErrors } : {}),
  };
  for (const [name, list] of Object.entries(named)) {
    parts.push(`${name}: ${list.map((e) => `${e.path} ${e.message}`).join('; ')}`);
  }
  return parts.join('; ');
}
