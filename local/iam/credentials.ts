// IAM enforcement, step one: who is calling. Every role the local runtime acts with (a function's execution role, the
// role an event source mapping polls with, a schedule's role) gets its own temporary credentials, so the auth gateway
// in front of each local server can tell callers apart by the access key of their SigV4 signature.
import { createHash } from 'node:crypto';
import { LOCAL_CREDENTIALS } from '../servers';

/** The credentials a role session signs with, as Lambda hands them to a function (AWS_ACCESS_KEY_ID, ...). */
export interface SessionCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
}

/** A role session: what AWS's STS would have issued when the role was assumed with this session name. */
export interface RolePrincipal {
  kind: 'role';
  roleArn: string;
  sessionName: string;
  /** arn:aws:sts::<account>:assumed-role/<role name>/<session name>: the caller AWS names in its errors. */
  assumedRoleArn: string;
}

/** Operators and seeding clients (ops CLI, demo seeding, the AWS CLI against `--serve`): always allowed. */
export interface AdminPrincipal {
  kind: 'admin';
}

/**
 * An AWS service acting as itself, e.g. scheduler.amazonaws.com assuming a schedule's role: authorized by resource
 * policies only (trust policies, Lambda permissions), as AWS does for service principals.
 */
export interface ServicePrincipal {
  kind: 'service';
  service: string;
}

export type Principal = RolePrincipal | AdminPrincipal | ServicePrincipal;

export const ADMIN: AdminPrincipal = { kind: 'admin' };

export class CredentialError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CredentialError';
  }
}

const ROLE_ARN = /^arn:aws[a-z-]*:iam::(\d{12}):role\/(?:[^/]+\/)*([^/]+)$/;
// The STS access key alphabet (base32, upper case); ASIA marks temporary credentials, as on AWS.
const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function base32(bytes: Buffer, length: number): string {
  let out = '';
  for (let i = 0; out.length < length; i++) out += BASE32[bytes[i] & 31];
  return out;
}

/** The role session's ARN, as STS names it: the role's path is dropped, its name kept. */
export function assumedRoleArnOf(roleArn: string, sessionName: string): string {
  const match = ROLE_ARN.exec(roleArn);
  if (!match) throw new CredentialError(`${roleArn} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)`);
  return `arn:aws:sts::${match[1]}:assumed-role/${match[2]}/${sessionName}`;
}

export function rolePrincipal(roleArn: string, sessionName: string): RolePrincipal {
  return { kind: 'role', roleArn, sessionName, assumedRoleArn: assumedRoleArnOf(roleArn, sessionName) };
}

/**
 * The access keys of the local stack. Keys are derived from role and session name, so a function keeps the same key
 * across runs (handy when reading logs), and two sessions of one role are still two callers.
 */
export class CredentialDirectory {
  private readonly byKey = new Map<string, { credentials: SessionCredentials; principal: Principal }>();

  constructor(
    /** The administrator's key pair. @default LOCAL_CREDENTIALS (S3RVER/S3RVER, what s3rver accepts) */
    private readonly admin: { accessKeyId: string; secretAccessKey: string } = LOCAL_CREDENTIALS,
  ) {}

  /**
   * The credentials of a role session (issued on first use, the same ones after).
   * @throws CredentialError when roleArn is not a role ARN, or sessionName is not a valid STS session name.
   */
  forRole(roleArn: string, sessionName: string): SessionCredentials {
    if (!/^[\w+=,.@-]{2,64}$/.test(sessionName)) {
      throw new CredentialError(
        `session name ${JSON.stringify(sessionName)} is not valid for STS (2 to 64 of [A-Za-z0-9_+=,.@-])`,
      );
    }
    const principal = rolePrincipal(roleArn, sessionName);
    const digest = createHash('sha256').update(`${roleArn}\n${sessionName}`).digest();
    const accessKeyId = `ASIA${base32(digest, 16)}`;
    const known = this.byKey.get(accessKeyId);
    if (known) {
      const p = known.principal as RolePrincipal;
      if (p.roleArn === roleArn && p.sessionName === sessionName) return known.credentials;
      // 80 bits of a hash: two sessions sharing one would make one act as the other, so this must stop loudly.
      throw new CredentialError(
        `access key ${accessKeyId} derived for ${roleArn}/${sessionName} already belongs to ${p.roleArn}/${p.sessionName}`,
      );
    }
    const credentials: SessionCredentials = {
      accessKeyId,
      secretAccessKey: createHash('sha256').update(`secret\n${roleArn}\n${sessionName}`).digest('base64').slice(0, 40),
      sessionToken: createHash('sha256').update(`token\n${roleArn}\n${sessionName}`).digest('base64'),
    };
    this.byKey.set(accessKeyId, { credentials, principal });
    return credentials;
  }

  /** Who signs with this access key: a role session, the administrator, or undefined for a key nobody was given. */
  principalOf(accessKeyId: string): Principal | undefined {
    if (accessKeyId === this.admin.accessKeyId) return ADMIN;
    return this.byKey.get(accessKeyId)?.principal;
  }
}
