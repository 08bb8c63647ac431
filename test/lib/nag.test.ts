// The acknowledgment helpers: exact cdk-nag finding IDs for one wildcard resource, and refusal of a bare "*".
import { type App, ArnFormat, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import { AcknowledgmentError, acknowledgeResourceWildcard } from '../../lib/nag';
import { testApp } from './cdkContext';

function scaffold() {
  const app = testApp();
  const stack = new Stack(app, 'S');
  const role = new iam.Role(stack, 'Role', { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') });
  return { app, stack, role };
}

const iam5Findings = (app: App): string[] =>
  new AwsSolutionsChecks()
    .validateScope(app)
    .violations.map((v) => v.ruleName)
    .filter((r) => r.startsWith('AwsSolutions-IAM5'));

describe('Function: acknowledgeResourceWildcard', () => {
  it('acknowledges one token-bearing resource under the ID cdk-nag reports, and nothing else', () => {
    const { app, stack, role } = scaffold();
    const versions = `${stack.formatArn({ service: 'lambda', resource: 'function', resourceName: 'f', arnFormat: ArnFormat.COLON_RESOURCE_NAME })}:*`;
    role.addToPolicy(new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [versions] }));
    app.synth();
    const before = iam5Findings(app);
    expect(acknowledgeResourceWildcard(role, versions, 'versions')).toBe(
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:f:*]',
    );
    expect(before).toEqual([
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:f:*]',
    ]);
    expect(iam5Findings(app)).toEqual([]);
  });

  it('refuses a resource without a scoped wildcard', () => {
    const { role } = scaffold();
    expect(() => acknowledgeResourceWildcard(role, '*', 'everything')).toThrow(
      new AcknowledgmentError('"*" is not a scoped wildcard resource; nothing to acknowledge under S/Role', 'S/Role'),
    );
    expect(() => acknowledgeResourceWildcard(role, 'arn:aws:s3:::b', 'one')).toThrow(
      '"arn:aws:s3:::b" is not a scoped wildcard resource; nothing to acknowledge under S/Role',
    );
  });
});
