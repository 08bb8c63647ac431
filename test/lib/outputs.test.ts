// The output-name contract the local runtime and the operator CLI rely on.
import {
  bucketOutputDescription,
  bucketOutputName,
  jobOutputDescription,
  jobOutputName,
  pascalCase,
  stackName,
} from '../../lib/outputs';

describe('Function: pascalCase', () => {
  it.each([
    ['payments-job', 'PaymentsJob'],
    ['providerApiKey', 'ProviderApiKey'],
    ['a-b2-c', 'AB2C'],
  ])('turns %s into %s', (input, expected) => {
    expect(pascalCase(input)).toBe(expected);
  });
});

describe('Function: jobOutputName', () => {
  it('prefixes the kind with the PascalCase job name', () => {
    expect(jobOutputName('uploads-job', 'EventSourceMappingUuid')).toBe('UploadsJobEventSourceMappingUuid');
    expect(jobOutputName('payments-job', 'QueueUrl')).toBe('PaymentsJobQueueUrl');
  });
});

describe('Function: stackName', () => {
  it('is PacedJobs-<env>', () => {
    expect(stackName('prod')).toBe('PacedJobs-prod');
  });
});

describe('Function: jobOutputDescription', () => {
  it('is "<job>: <Kind>", which the operator CLI parses to find the jobs', () => {
    expect(jobOutputDescription('payments-job', 'DlqUrl')).toBe('payments-job: DlqUrl');
  });
});

describe('Function: bucketOutputName', () => {
  it('is <KeyPascal>BucketName, apart from every per-job output name', () => {
    expect(bucketOutputName('uploads')).toBe('UploadsBucketName');
    expect(bucketOutputName('raw-files')).toBe('RawFilesBucketName');
  });
});

describe('Function: bucketOutputDescription', () => {
  it('names the config key and does not read as "<job>: <Kind>", so the operator CLI never takes it for a job', () => {
    expect(bucketOutputDescription('uploads')).toBe('Name of the application bucket appResources.buckets.uploads');
    expect(bucketOutputDescription('uploads')).not.toMatch(/^(.+): (\w+)$/);
  });
});
