// cdk-nag acknowledgments shared by the constructs: each one names the exact finding and carries its reason.
import { Stack, Validations } from 'aws-cdk-lib';
import type { Grant } from 'aws-cdk-lib/aws-iam';
import type { IConstruct } from 'constructs';
// cdk-nag builds IAM5 finding IDs with this function; using it keeps our acknowledgments byte-identical to its findings.
import { flattenCfnReference } from 'cdk-nag/lib/utils/flatten-cfn-reference';

/** An acknowledgment that would hide more than the one reviewed wildcard it is meant for. */
export class AcknowledgmentError extends Error {
  constructor(message: string, public readonly construct: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AcknowledgmentError';
  }
}

/** Acknowledges one rule (or one `Rule[finding]`) on `scope` and everything below it. */
export function acknowledge(scope: IConstruct, id: string, reason: string): void {
  Validations.of(scope).acknowledge({ id, reason });
}

const asArray = (v: unknown): unknown[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

/**
 * Acknowledges exactly the AwsSolutions-IAM5 wildcard findings a grant* call produced, with one reason.
 *
 * Hand-written because cdk-nag v3 has no prefix matching: each wildcard (an action group such as `s3:GetObject*`, or
 * a resource such as `<table ARN>/index/*`) is its own finding ID. Deriving the IDs from the grant itself means an
 * acknowledgment can never cover a wildcard that some other, unreviewed statement introduces. A bare `*` resource
 * is refused: no grant here may need it, and one that did would deserve its own review.
 *
 * @returns the finding IDs acknowledged (for tests and for the caller's own bookkeeping).
 */
export function acknowledgeGrantWildcards(scope: IConstruct, grant: Grant, reason: string): string[] {
  const stack = Stack.of(scope);
  const ids = new Set<string>();
  for (const statement of grant.principalStatements) {
    const json = stack.resolve(statement.toStatementJson()) as { Action?: unknown; Resource?: unknown };
    for (const action of asArray(json.Action)) {
      if (typeof action === 'string' && action.includes('*')) ids.add(`AwsSolutions-IAM5[Action::${action}]`);
    }
    for (const resource of asArray(json.Resource)) {
      const flat = flattenCfnReference(resource);
      if (flat === '*') {
        throw new AcknowledgmentError(`refusing to acknowledge a grant on Resource "*" under ${scope.node.path}: ${reason}`, scope.node.path);
      }
      if (flat.includes('*')) ids.add(`AwsSolutions-IAM5[Resource::${flat}]`);
    }
  }
  for (const id of ids) acknowledge(scope, id, reason);
  return [...ids];
}

/**
 * Acknowledges the AwsSolutions-IAM5 finding for one wildcard resource (as written in code, tokens and all) on
 * `scope`, for policies the CDK writes itself where no Grant is handed back (e.g. a schedule target's role).
 */
export function acknowledgeResourceWildcard(scope: IConstruct, resource: string, reason: string): string {
  const flat = flattenCfnReference(Stack.of(scope).resolve(resource));
  if (!flat.includes('*') || flat === '*') {
    throw new AcknowledgmentError(`"${flat}" is not a scoped wildcard resource; nothing to acknowledge under ${scope.node.path}`, scope.node.path);
  }
  const id = `AwsSolutions-IAM5[Resource::${flat}]`;
  acknowledge(scope, id, reason);
  return id;
}
