// Security checks on the synthesized dev (creates app resources) and prod (imports them) templates: cdk-nag with
// justified acknowledgments only, least-privilege consumer roles, no secret in the environment, encryption and TLS.
import { type App, CfnResource, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { buildApp } from '../../bin/app';
import { EnvVar } from '../../lambda/core/constants';
import { loadEnvironment } from '../../lib/config/load';
import type { PacedJobsStack } from '../../lib/stack';
import { testApp } from '../lib/cdkContext';
import { logicalId, resourcesOf, statementsOfRole, actionsOf, type Statement } from '../lib/templateHelpers';

/** An acknowledgment's reason must say why in a sentence, not wave it through. */
const MIN_REASON_WORDS = 12;
/** The only actions a role may hold on Resource "*": X-Ray's, which have no resource-level permissions. */
const STAR_ACTIONS = ['xray:PutTelemetryRecords', 'xray:PutTraceSegments'];

interface Built {
  name: string;
  app: App;
  stack: PacedJobsStack;
  template: Template;
  resources: Record<string, { Type: string; Properties?: Record<string, any>; Metadata?: Record<string, unknown> }>;
}

function build(name: string): Built {
  const { app, stack } = buildApp(testApp({ context: { env: name } }));
  // Synthesis runs the nag plugins bin/app.ts registers, and throws on any unacknowledged error.
  app.synth();
  const template = Template.fromStack(stack);
  return { name, app, stack, template, resources: template.toJSON().Resources };
}

const byType = (b: Built, type: string) => Object.entries(b.resources).filter(([, r]) => r.Type === type);

/** Every logical ID a CloudFormation value references (Ref, Fn::GetAtt), pseudo parameters left out. */
function referencedIds(value: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(value)) value.forEach((v) => referencedIds(v, into));
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === 'Ref' && typeof v === 'string' && !v.startsWith('AWS::')) into.add(v);
      else if (k === 'Fn::GetAtt') into.add(Array.isArray(v) ? String(v[0]) : String(v).split('.')[0]);
      else referencedIds(v, into);
    }
  }
  return into;
}

/** The literal strings of a CloudFormation value, without the logical IDs its references name. */
function literalText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map(literalText).join(' ');
  if (value && typeof value === 'object') {
    return Object.entries(value)
      .filter(([k]) => k !== 'Ref' && k !== 'Fn::GetAtt')
      .map(([, v]) => literalText(v))
      .join(' ');
  }
  return '';
}

/** A resource ARN as text, references written as <Id>, so an imported ARN shows the name it was built from. */
function flatten(value: unknown): string {
  if (typeof value === 'string') return value;
  const v = value as Record<string, any>;
  if (v.Ref) return `<${v.Ref}>`;
  if (v['Fn::GetAtt']) return `<${[].concat(v['Fn::GetAtt']).join('.')}>`;
  if (v['Fn::Join']) return (v['Fn::Join'][1] as unknown[]).map(flatten).join(v['Fn::Join'][0]);
  return JSON.stringify(value);
}

/** What one consumer may reach: logical IDs of resources in the template, and ARNs of imported resources by name. */
function allowedFor(b: Built, jobName: string): { ids: Set<string>; importedArnPatterns: RegExp[] } {
  const { stack } = b;
  const job = stack.jobs[jobName];
  const config = loadEnvironment(b.name).jobs[jobName];
  const ids = new Set<string>([
    logicalId(job.queue),
    logicalId(job.dlq),
    logicalId(stack.stateTables.idempotencyTable),
    logicalId(stack.stateTables.ledgerTable),
    logicalId(stack.stateTables.limiterTable),
    logicalId(job.consumer.functionLogGroup),
  ]);
  const importedArnPatterns: RegExp[] = [];
  const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const add = (construct: IConstruct, importedPattern: RegExp) => {
    // An imported resource has no CloudFormation resource of its own: its ARN is built from the configured name.
    if (construct.node.defaultChild === undefined) importedArnPatterns.push(importedPattern);
    else ids.add(logicalId(construct));
  };
  // The consumer gets the uses its apply needs (`apply` modes), each table's indexes by name, never `index/*`.
  for (const use of Object.values(config.uses.tables).filter((u) => u.apply.length > 0)) {
    const name = stack.appResources.names.tables[use.ref];
    const indexes = stack.appResources.indexNames[use.ref].map(escape).join('|');
    add(
      stack.appResources.tables[use.ref],
      new RegExp(
        `^arn:<AWS::Partition>:dynamodb:<AWS::Region>:<AWS::AccountId>:table/${escapeRegExp(name)}(/index/(${indexes}))?$`,
      ),
    );
  }
  for (const use of Object.values(config.uses.buckets).filter((u) => u.apply.length > 0)) {
    // An imported bucket's ARN is built from its configured name; a created one is reached by its own ARN attribute.
    const name = stack.appResources.names.buckets[use.ref];
    add(stack.appResources.buckets[use.ref], new RegExp(`^arn:<AWS::Partition>:s3:::${escapeRegExp(name)}(/\\*)?$`));
  }
  for (const use of Object.values(config.uses.secrets)) {
    const name = stack.appResources.names.secrets[use.ref];
    // fromSecretNameV2 grants on the name plus "-??????", Secrets Manager's random suffix.
    add(
      stack.appResources.secrets[use.ref],
      new RegExp(
        `^arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:${escapeRegExp(name)}-\\?\\?\\?\\?\\?\\?$`,
      ),
    );
  }
  return { ids, importedArnPatterns };
}

const builds: Record<string, Built> = {};

beforeAll(() => {
  builds.dev = build('dev');
  builds.prod = build('prod');
});

describe.each(['dev', 'prod'])('Class: PacedJobsStack (environment %s)', (name) => {
  const b = () => builds[name];

  describe('Method: constructor (cdk-nag)', () => {
    it('has zero unacknowledged AwsSolutions and Serverless findings', () => {
      const findings = [new AwsSolutionsChecks(), new ServerlessChecks()].flatMap((pack) =>
        pack
          .validateScope(b().app)
          .violations.map((v) => `${v.ruleName} at ${v.violatingResources.map((r) => r.constructPath).join(', ')}`),
      );
      expect(findings).toEqual([]);
    });

    it('acknowledges each finding by its ID on one resource, with a reason of at least 12 words, never on the stack or app', () => {
      const acknowledgments = b()
        .app.node.findAll()
        .flatMap((c) =>
          c.node.metadata
            .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
            .flatMap((m) =>
              Object.entries(m.data as Record<string, string>).map(([id, reason]) => ({
                path: c.node.path,
                id,
                reason,
                construct: c,
              })),
            ),
        );
      expect(acknowledgments.length).toBeGreaterThan(0);
      const problems = acknowledgments.flatMap(({ path, id, reason, construct }) => {
        const out: string[] = [];
        if (!/(AwsSolutions|Serverless)-[A-Za-z0-9]+(\[.+\])?$/.test(id))
          out.push(`${path}: "${id}" does not name a rule`);
        // A bare IAM5 would hide every wildcard under the construct; each must name its one finding.
        if (/AwsSolutions-IAM5$/.test(id)) out.push(`${path}: AwsSolutions-IAM5 without the finding it is for`);
        if (reason.trim().split(/\s+/).length < MIN_REASON_WORDS)
          out.push(`${path}: "${id}" has too short a reason: "${reason}"`);
        if (construct === b().stack || construct === b().app || construct.node.scope === undefined)
          out.push(`${path}: "${id}" is a blanket acknowledgment`);
        // On one resource (a role, a function, a queue), never on a group such as a whole job or the app resources.
        else if (
          !CfnResource.isCfnResource(construct) &&
          !(construct.node.defaultChild !== undefined && CfnResource.isCfnResource(construct.node.defaultChild))
        )
          out.push(`${path}: "${id}" covers a group of resources`);
        return out;
      });
      expect(problems).toEqual([]);
    });

    it('excuses a wildcard only where it is: "*" on policies holding X-Ray alone, never a whole role\'s findings of a rule', () => {
      const problems: string[] = [];
      for (const c of b().app.node.findAll()) {
        const ids = c.node.metadata
          .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
          .flatMap((m) => Object.keys(m.data as Record<string, string>).map((id) => id.replace(/^Annotation::/, '')));
        for (const id of ids) {
          // A rule acknowledged without its finding would hide every statement of the role, present and future.
          if (/^(AwsSolutions-IAM5|Serverless-LambdaStarPermissions)$/.test(id))
            problems.push(`${c.node.path}: ${id} for the whole construct`);
          if (id !== 'AwsSolutions-IAM5[Resource::*]') continue;
          const resource =
            b().resources[b().stack.resolve((c.node.defaultChild as CfnResource | undefined)?.logicalId) as string];
          const statements =
            resource?.Type === 'AWS::IAM::Policy' ? resource.Properties?.PolicyDocument.Statement : undefined;
          if (
            JSON.stringify(statements) !==
            JSON.stringify([
              { Action: ['xray:PutTelemetryRecords', 'xray:PutTraceSegments'], Effect: 'Allow', Resource: '*' },
            ])
          ) {
            problems.push(`${c.node.path}: Resource::* acknowledged on what is not the X-Ray policy`);
          }
        }
      }
      expect(problems).toEqual([]);
    });

    it('uses no legacy cdk-nag suppressions in resource metadata', () => {
      expect(
        Object.entries(b().resources)
          .filter(([, r]) => r.Metadata?.cdk_nag !== undefined)
          .map(([id]) => id),
      ).toEqual([]);
    });
  });

  describe('Method: constructor (consumer roles are least privilege)', () => {
    // Every job the environment configures: whichever the reference app keeps.
    it.each(Object.keys(loadEnvironment(name).jobs))(
      'lets the %s consumer reach only its own queues, target resources, state tables and secret',
      (jobName) => {
        const job = b().stack.jobs[jobName];
        const statements: Statement[] = statementsOfRole(b().template, job.consumer.executionRole);
        const { ids, importedArnPatterns } = allowedFor(b(), jobName);
        const stray: string[] = [];
        const reached = new Set<string>();
        for (const s of statements) {
          expect(s.Effect).toBe('Allow');
          for (const resource of resourcesOf(s)) {
            if (resource === '*') {
              for (const action of actionsOf(s)) if (!STAR_ACTIONS.includes(action)) stray.push(`${action} on *`);
              continue;
            }
            const refs = referencedIds(resource);
            for (const id of refs) ids.has(id) ? reached.add(id) : stray.push(`${actionsOf(s).join(',')} on ${id}`);
            if (refs.size === 0) {
              const arn = flatten(resource);
              const match = importedArnPatterns.find((p) => p.test(arn));
              if (match) reached.add(match.source);
              else stray.push(`${actionsOf(s).join(',')} on ${arn}`);
            }
          }
        }
        expect(stray).toEqual([]);
        // And it does reach what it needs: nothing allowed goes unused, so the allowed set is not looser than the grants.
        expect([...reached].sort()).toEqual([...ids, ...importedArnPatterns.map((p) => p.source)].sort());
      },
    );

    it("never lets a consumer reach another job's queue or DLQ", () => {
      const jobs = Object.values(b().stack.jobs);
      for (const job of jobs) {
        const mentioned = referencedIds(statementsOfRole(b().template, job.consumer.executionRole));
        for (const other of jobs.filter((j) => j !== job)) {
          expect(
            [logicalId(other.queue), logicalId(other.dlq), logicalId(other.producerDlq)].filter((id) =>
              mentioned.has(id),
            ),
          ).toEqual([]);
        }
      }
    });
  });

  describe('Method: constructor (no secret in the environment)', () => {
    it('has no variable named like a credential and no value that looks like a key or resolves a secret', () => {
      const problems: string[] = [];
      for (const [id, fn] of byType(b(), 'AWS::Lambda::Function')) {
        const variables = (fn.Properties?.Environment?.Variables ?? {}) as Record<string, unknown>;
        for (const [key, value] of Object.entries(variables)) {
          if (/SECRET|PASSWORD|TOKEN|API_?KEY|CREDENTIAL|PRIVATE/i.test(key)) problems.push(`${id}: variable ${key}`);
          const text = JSON.stringify(value);
          if (/resolve:secretsmanager|resolve:ssm-secure|SecretString/i.test(text))
            problems.push(`${id}: ${key} resolves a secret value`);
          if ([...referencedIds(value)].some((ref) => b().resources[ref]?.Type === 'AWS::SecretsManager::Secret'))
            problems.push(`${id}: ${key} references a secret`);
          // A random-looking run of 24+ characters mixing cases and digits: the shape of an API key, not of a name.
          // Literal text only: logical IDs in references (QueueD33C147B) are names, not values.
          for (const token of literalText(value).match(/[A-Za-z0-9+/_]{24,}/g) ?? []) {
            if (/[a-z]/.test(token) && /[A-Z]/.test(token) && /\d/.test(token))
              problems.push(`${id}: ${key} holds key-like "${token}"`);
          }
        }
      }
      expect(problems).toEqual([]);
    });

    it('passes each secret a job uses to its consumer by secret name only, and the template holds no secret value', () => {
      const config = loadEnvironment(name);
      const withSecrets = Object.entries(config.jobs).filter(([, job]) => Object.keys(job.uses.secrets).length > 0);
      for (const [jobName, jobConfig] of withSecrets) {
        const job = b().stack.jobs[jobName];
        const variables = b().resources[logicalId(job.consumer)].Properties?.Environment.Variables as Record<
          string,
          string
        >;
        const settings = JSON.parse(variables[EnvVar.JOB_SETTINGS]) as { secrets: Record<string, string> };
        const names = Object.entries(jobConfig.uses.secrets).map(([alias, use]) => [
          alias,
          config.appResources.secrets[use.ref].secretName,
        ]);
        expect(settings.secrets).toEqual(Object.fromEntries(names));
      }
      for (const [, secret] of byType(b(), 'AWS::SecretsManager::Secret')) {
        expect(secret.Properties).not.toHaveProperty('SecretString');
        expect(secret.Properties).toHaveProperty('GenerateSecretString');
      }
    });
  });

  describe('Method: constructor (encryption at rest and TLS only)', () => {
    it('encrypts every queue and every table', () => {
      const queues = byType(b(), 'AWS::SQS::Queue');
      // Per job: the work queue, its DLQ, the admission queue and the producer DLQ; and the alarm subscription's DLQ.
      expect(queues.length).toBe(4 * Object.keys(b().stack.jobs).length + 1);
      expect(
        queues
          .filter(([, q]) => q.Properties?.SqsManagedSseEnabled !== true && q.Properties?.KmsMasterKeyId === undefined)
          .map(([id]) => id),
      ).toEqual([]);
      const tables = byType(b(), 'AWS::DynamoDB::Table');
      // The runtime's three state tables, and the application's tables where the environment creates them (dev).
      const appTables = loadEnvironment(name).appResources;
      expect(tables.length).toBe(3 + (appTables.create ? Object.keys(appTables.tables).length : 0));
      expect(tables.filter(([, t]) => t.Properties?.SSESpecification?.SSEEnabled !== true).map(([id]) => id)).toEqual(
        [],
      );
    });

    it('names no bucket it creates, since S3 names are global, and passes each job its bucket by reference or by the imported name', () => {
      expect(
        byType(b(), 'AWS::S3::Bucket')
          .filter(([, r]) => r.Properties?.BucketName !== undefined)
          .map(([id]) => id),
      ).toEqual([]);
      const { appResources } = loadEnvironment(name);
      for (const [jobName, job] of Object.entries(b().stack.jobs)) {
        const variable = b().resources[logicalId(job.consumer)].Properties?.Environment.Variables[
          EnvVar.JOB_SETTINGS
        ] as unknown;
        // Each reference in JOB_SETTINGS is one of the job's created buckets; everything else is literal text.
        const uses = Object.values(loadEnvironment(name).jobs[jobName].uses.buckets);
        const created = appResources.create
          ? uses.map((use) => logicalId(b().stack.appResources.buckets[use.ref]))
          : [];
        expect([...referencedIds(variable)].sort()).toEqual([...new Set(created)].sort());
        for (const id of created) expect(b().resources[id].Type).toBe('AWS::S3::Bucket');
      }
    });

    it('encrypts every bucket and the alarm topic', () => {
      expect(
        byType(b(), 'AWS::S3::Bucket')
          .filter(([, r]) => r.Properties?.BucketEncryption === undefined)
          .map(([id]) => id),
      ).toEqual([]);
      const topics = byType(b(), 'AWS::SNS::Topic');
      expect(topics.length).toBe(1);
      expect(topics.filter(([, t]) => t.Properties?.KmsMasterKeyId === undefined).map(([id]) => id)).toEqual([]);
    });

    it.each([
      // SNS's enforceSSL covers Publish, the one call that carries data into the topic.
      ['AWS::SQS::Queue', 'AWS::SQS::QueuePolicy', 'Queues', 'sqs:*'],
      ['AWS::S3::Bucket', 'AWS::S3::BucketPolicy', 'Bucket', 's3:*'],
      ['AWS::SNS::Topic', 'AWS::SNS::TopicPolicy', 'Topics', 'sns:Publish'],
    ])('denies %s requests without TLS through its %s, for every principal', (type, policyType, targetKey, action) => {
      const denied = new Set<string>();
      for (const [, policy] of byType(b(), policyType)) {
        const statements = policy.Properties?.PolicyDocument.Statement as Record<string, any>[];
        const tlsDeny = statements.some(
          (s) =>
            s.Effect === 'Deny' &&
            (s.Principal === '*' || s.Principal?.AWS === '*') &&
            s.Condition?.Bool?.['aws:SecureTransport'] === 'false' &&
            [].concat(s.Action).includes(action as never),
        );
        if (tlsDeny) referencedIds(policy.Properties?.[targetKey]).forEach((id) => denied.add(id));
      }
      const all = byType(b(), type).map(([id]) => id);
      expect(all.filter((id) => !denied.has(id))).toEqual([]);
    });
  });
});
