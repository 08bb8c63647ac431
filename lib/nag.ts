// cdk-nag acknowledgments shared by the constructs: each one names the exact finding and carries its reason.
import { Stack, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
// cdk-nag builds IAM5 finding IDs with this function; using it keeps our acknowledgments byte-identical to its findings.
import { flattenCfnReference } from 'cdk-nag/lib/utils/flatten-cfn-reference';

/** An acknowledgment that would hide more than the one reviewed wildcard it is meant for. */
export class AcknowledgmentError extends Error {
  constructor(
    message: string,
    public readonly construct: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'AcknowledgmentError';
  }
}

/** Acknowledges one rule (or one `Rule[finding]`) on `scope` and everything below it. */
export function acknowledge(scope: IConstruct, id: string, reason: string): void {
  Validations.of(scope).acknowledge({ id, reason });
}

/**
 * Acknowledges the AwsSolutions-IAM5 finding for one wildcard resource (as written in code, tokens and all) on
 * `scope`, for policies the CDK writes itself (e.g. a schedule target's role).
 */
export function acknowledgeResourceWildcard(scope: IConstruct, resource: string, reason: string): string {
  const flat = flattenCfnReference(Stack.of(scope).resolve(resource));
  if (!flat.includes('*') || flat === '*') {
    throw new AcknowledgmentError(
      `"${flat}" is not a scoped wildcard resource; nothing to acknowledge under ${scope.node.path}`,
      scope.node.path,
    );
  }
  const id = `AwsSolutions-IAM5[Resource::${flat}]`;
  acknowledge(scope, id, reason);
  return id;
}
