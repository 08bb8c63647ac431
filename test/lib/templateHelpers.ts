// Test helpers for reading a synthesized template by construct: logical IDs, references, and a role's IAM statements.
import { type CfnElement, Stack } from 'aws-cdk-lib';
import type { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';

/** The CloudFormation logical ID of a construct's default resource (or of the resource itself). */
export function logicalId(construct: IConstruct): string {
  const element = (construct.node.defaultChild ?? construct) as CfnElement;
  return Stack.of(construct).resolve(Stack.of(construct).getLogicalId(element)) as string;
}

export const arnOf = (construct: IConstruct) => ({ 'Fn::GetAtt': [logicalId(construct), 'Arn'] });
export const refOf = (construct: IConstruct) => ({ Ref: logicalId(construct) });

/** An ARN CDK builds from a name in this account and region, e.g. `:table/payments-prod`. */
export const importedArn = (service: string, rest: string) => ({
  'Fn::Join': [
    '',
    ['arn:', { Ref: 'AWS::Partition' }, `:${service}:`, { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, rest],
  ],
});

/** The synthesized resource (Type, Properties, DeletionPolicy, ...) behind a construct. */
export function resourceOf(template: Template, construct: IConstruct): Record<string, any> {
  const resource = template.toJSON().Resources[logicalId(construct)];
  if (!resource) throw new Error(`no resource ${logicalId(construct)} in the template`);
  return resource;
}

export type Statement = { Action: string | string[]; Effect: string; Resource: unknown };

/** Every statement of the inline policies attached to `role`. */
export function statementsOfRole(template: Template, role: IConstruct): Statement[] {
  const policies = template.findResources('AWS::IAM::Policy', { Properties: { Roles: [{ Ref: logicalId(role) }] } });
  return Object.values(policies).flatMap(
    (p) => (p as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument.Statement,
  );
}

export const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
export const resourcesOf = (s: Statement): unknown[] => (Array.isArray(s.Resource) ? s.Resource : [s.Resource]);
const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/** Every action allowed on `resource`, sorted, however CDK merged the statements. */
export const actionsOn = (statements: Statement[], resource: unknown): string[] =>
  [
    ...new Set(
      statements
        .filter((s) => s.Effect === 'Allow' && resourcesOf(s).some((r) => sameJson(r, resource)))
        .flatMap(actionsOf),
    ),
  ].sort();

/** Whether any statement mentions `needle` (a reference object) anywhere. */
export const mentions = (statements: Statement[], needle: unknown): boolean =>
  JSON.stringify(statements).includes(JSON.stringify(needle));
