// The output-name contract the local runtime and the operator CLI rely on.
import { jobOutputDescription, jobOutputName, pascalCase, stackName } from '../../lib/outputs';

describe('Function: pascalCase', () => {
  it.each([
    ['payment-reconciliation', 'PaymentReconciliation'],
    ['providerApiKey', 'ProviderApiKey'],
    ['a-b2-c', 'AB2C'],
  ])('turns %s into %s', (input, expected) => {
    expect(pascalCase(input)).toBe(expected);
  });
});

describe('Function: jobOutputName', () => {
  it('prefixes the kind with the PascalCase job name', () => {
    expect(jobOutputName('stale-upload-cleanup', 'EventSourceMappingUuid')).toBe('StaleUploadCleanupEventSourceMappingUuid');
    expect(jobOutputName('payment-reconciliation', 'QueueUrl')).toBe('PaymentReconciliationQueueUrl');
  });
});

describe('Function: stackName', () => {
  it('is PacedJobs-<env>', () => {
    expect(stackName('prod')).toBe('PacedJobs-prod');
  });
});

describe('Function: jobOutputDescription', () => {
  it('is "<job>: <Kind>", which the operator CLI parses to find the jobs', () => {
    expect(jobOutputDescription('payment-reconciliation', 'DlqUrl')).toBe('payment-reconciliation: DlqUrl');
  });
});
