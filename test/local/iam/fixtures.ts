// Small hand-written plans for the IAM tests: roles with identity policies and resource policies, as local/plan.ts
// plans them from a template (every ARN resolved).
import {
  emptyPlan,
  type PlannedIam,
  type PlannedRole,
  type PolicyStatement,
  type StackPlan,
} from '../../../local/plan';

export const ACCOUNT = '000000000000';
export const REGION = 'us-east-1';

export const roleArn = (name: string) => `arn:aws:iam::${ACCOUNT}:role/${name}`;
export const tableArn = (name: string) => `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${name}`;
export const queueArn = (name: string) => `arn:aws:sqs:${REGION}:${ACCOUNT}:${name}`;
export const functionArn = (name: string) => `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${name}`;
export const keyArn = (id: string) => `arn:aws:kms:${REGION}:${ACCOUNT}:key/${id}`;

export function role(name: string, statements: PolicyStatement[], extra: Partial<PlannedRole> = {}): PlannedRole {
  return {
    logicalId: name,
    name,
    arn: roleArn(name),
    policies: statements.length
      ? [{ name: `${name}DefaultPolicy`, document: { Version: '2012-10-17', Statement: statements } }]
      : [],
    externalManagedPolicyArns: [],
    ...extra,
  };
}

/** The statement CDK's enforceSSL puts on every queue and bucket. */
export function enforceSsl(service: 'sqs' | 's3', resource: string | string[]): PolicyStatement {
  return {
    Action: `${service}:*`,
    Condition: { Bool: { 'aws:SecureTransport': 'false' } },
    Effect: 'Deny',
    Principal: { AWS: '*' },
    Resource: resource,
  };
}

export function plan(iam: PlannedIam, extra: Partial<StackPlan> = {}): StackPlan {
  return { ...emptyPlan({ stackName: 'Test', region: REGION, accountId: ACCOUNT }), iam, ...extra };
}
