// The acknowledgment helpers: exact cdk-nag finding IDs derived from a grant, and refusal of a bare "*".
import { App, ArnFormat, Stack, Validations } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { AwsSolutionsChecks } from 'cdk-nag';
import { AcknowledgmentError, acknowledgeGrantWildcards, acknowledgeResourceWildcard } from '../../lib/nag';

function scaffold() {
  const app = new App();
  const stack = new Stack(app, 'S');
  const role = new iam.Role(stack, 'Role', { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') });
  return { app, stack, role };
}

const iam5Findings = (app: App): string[] =>
  new AwsSolutionsChecks().validateScope(app).violations.map((v) => v.ruleName).filter((r) => r.startsWith('AwsSolutions-IAM5'));

describe('Function: acknowledgeGrantWildcards', () => {
  it('acknowledges exactly the wildcard actions and resources of the grant, matching cdk-nag', () => {
    const { app, stack, role } = scaffold();
    const bucket = s3.Bucket.fromBucketName(stack, 'B', 'my-bucket');
    const grant = bucket.grantRead(role);
    app.synth();
    const before = iam5Findings(app).sort();
    const ids = acknowledgeGrantWildcards(role, grant, 'reads objects of one bucket');
    expect(ids.sort()).toEqual(before);
    expect(ids.sort()).toEqual([
      'AwsSolutions-IAM5[Action::s3:GetBucket*]',
      'AwsSolutions-IAM5[Action::s3:GetObject*]',
      'AwsSolutions-IAM5[Action::s3:List*]',
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::my-bucket/*]',
    ]);
    expect(iam5Findings(app)).toEqual([]);
  });

  it('records the reason on the construct for the audit trail', () => {
    const { stack, role } = scaffold();
    const table = dynamodb.Table.fromTableAttributes(stack, 'T', { tableName: 't', globalIndexes: ['i'] });
    acknowledgeGrantWildcards(role, table.grantReadData(role), 'queries its indexes');
    const entry = role.node.metadata.find((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY);
    expect(JSON.stringify(entry?.data)).toContain('AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:dynamodb:<AWS::Region>:<AWS::AccountId>:table/t/index/*]');
    expect(JSON.stringify(entry?.data)).toContain('queries its indexes');
  });

  it('acknowledges nothing for a grant without wildcards', () => {
    const { stack, role } = scaffold();
    const table = dynamodb.Table.fromTableAttributes(stack, 'T', { tableName: 't' });
    expect(acknowledgeGrantWildcards(role, table.grantReadData(role), 'unused')).toEqual([]);
  });

  it('refuses to acknowledge a grant on every resource', () => {
    const { role } = scaffold();
    const grant = iam.Grant.addToPrincipal({ grantee: role, actions: ['s3:ListAllMyBuckets'], resourceArns: ['*'] });
    expect(() => acknowledgeGrantWildcards(role, grant, 'lists buckets')).toThrow(
      new AcknowledgmentError('refusing to acknowledge a grant on Resource "*" under S/Role: lists buckets', 'S/Role'),
    );
  });
});

describe('Function: acknowledgeResourceWildcard', () => {
  it('acknowledges one token-bearing resource under the ID cdk-nag reports', () => {
    const { stack, role } = scaffold();
    expect(acknowledgeResourceWildcard(role, `${stack.formatArn({ service: 'lambda', resource: 'function', resourceName: 'f', arnFormat: ArnFormat.COLON_RESOURCE_NAME })}:*`, 'versions')).toBe(
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:f:*]',
    );
  });

  it('refuses a resource without a scoped wildcard', () => {
    const { role } = scaffold();
    expect(() => acknowledgeResourceWildcard(role, '*', 'everything')).toThrow('"*" is not a scoped wildcard resource; nothing to acknowledge under S/Role');
    expect(() => acknowledgeResourceWildcard(role, 'arn:aws:s3:::b', 'one')).toThrow('"arn:aws:s3:::b" is not a scoped wildcard resource; nothing to acknowledge under S/Role');
  });
});
