// The reference app's deployable unit for one environment: its app resources, and its configured jobs through PacedJobs.
import * as path from 'node:path';
import { Aws, CfnOutput, CfnRule, Fn, Stack, type StackProps, Tags } from 'aws-cdk-lib';
import type * as scheduler from 'aws-cdk-lib/aws-scheduler';
import type { Construct } from 'constructs';
import { AppResources } from './app-resources';
import type { EnvironmentConfig } from './config/schema';
import type { Monitoring } from './monitoring';
import { bucketOutputDescription, bucketOutputName } from './outputs';
import type { PacedJob } from './paced-job';
import { type JobProps, type JobUses, PacedJobs, scheduleGroupNameProblem } from './paced-jobs';
import { assertNoProblems } from './props-error';
import type { StateTables } from './state-tables';

/** Where the reference app's jobs live: `lambda/jobs/<name>/index.ts`, each exporting `job`. */
export const JOBS_DIR = path.join(__dirname, '..', 'lambda', 'jobs');

export interface PacedJobsStackProps extends StackProps {
  /** The environment's name (dev, staging, prod), used in tags and descriptions. */
  readonly environmentName: string;
  /** The environment's validated configuration (lib/config/load.ts). */
  readonly config: EnvironmentConfig;
  /**
   * Each job's entry (the module exporting its `job`), by job name: a test builds the stack's jobs on a fixture job's
   * code this way. @default `lambda/jobs/<name>/index.ts`
   */
  readonly jobEntry?: (jobName: string) => string;
}

/**
 * The reference app's stack for one environment: its application resources (AppResources) and its three example jobs,
 * built through the PacedJobs construct as a team's own stack would build its jobs.
 */
export class PacedJobsStack extends Stack {
  public readonly appResources: AppResources;
  /** The jobs' construct: its state tables, schedule group, jobs and monitoring. */
  public readonly pacedJobs: PacedJobs;
  public readonly stateTables: StateTables;
  /** One per configured job, by job name. */
  public readonly jobs: Readonly<Record<string, PacedJob>>;
  /** The alarms, their SNS topic and the dashboard. */
  public readonly monitoring: Monitoring;
  /** The environment's schedule group (scheduleGroupName): every job's schedule is in it. */
  public readonly scheduleGroup: scheduler.ScheduleGroup;

  constructor(scope: Construct, id: string, props: PacedJobsStackProps) {
    const {
      environmentName,
      config,
      jobEntry = (jobName: string) => path.join(JOBS_DIR, jobName, 'index.ts'),
      ...stackProps
    } = props;
    const problems: string[] = [];
    const groupProblem = scheduleGroupNameProblem(environmentName);
    if (groupProblem) problems.push(`environmentName ${groupProblem}`);
    assertNoProblems(`PacedJobsStack ${id}`, problems);
    super(scope, id, {
      description: `Paced jobs (${environmentName}): scheduled, rate-limited, idempotent job processing`,
      ...stackProps,
    });
    Tags.of(this).add('project', 'paced-jobs');
    Tags.of(this).add('environment', environmentName);
    // A template synthesized without a pinned account is region-agnostic, and `cdk deploy` puts it in whatever region the
    // deployer's profile names; the data (personal data among it) would then live in a region nobody chose. CloudFormation
    // checks this rule before it creates anything, so a deploy anywhere but the configured region fails at once.
    new CfnRule(this, 'DeployedInConfiguredRegion', {
      assertions: [
        {
          assert: Fn.conditionEquals(Aws.REGION, config.region),
          assertDescription: `Environment ${environmentName} is configured for region ${config.region} (lib/config/environments.ts); deploy it there`,
        },
      ],
    });

    this.appResources = new AppResources(this, 'AppResources', {
      config: config.appResources,
      retainData: config.retainData,
    });
    for (const [key, bucket] of Object.entries(this.appResources.buckets)) {
      // A created bucket's name is CloudFormation's: the output is how an operator (or a tool) learns it.
      new CfnOutput(this, bucketOutputName(key), {
        value: bucket.bucketName,
        description: bucketOutputDescription(key),
      });
    }

    // 'Default' leaves the construct's own ID out of every logical ID inside it (CDK's rule for that ID), so the
    // resources keep the logical IDs they had when the stack built them itself: a deployed stack updates in place.
    this.pacedJobs = new PacedJobs(this, 'Default', {
      environmentName,
      // In this repository the operator CLI is an npm script (a team's app runs the package's bin, the default).
      operatorCommand: 'npm run ops --',
      alarmEmail: config.alarmEmail,
      logRetentionDays: config.logRetentionDays,
      retainData: config.retainData,
      operatorRoles: config.operatorRoles,
      jobs: Object.fromEntries(
        Object.entries(config.jobs).map(([jobName, job]): [string, JobProps] => [
          jobName,
          {
            ...job,
            entry: jobEntry(jobName),
            uses: this.usesOf(job.uses),
          },
        ]),
      ),
    });
    this.stateTables = this.pacedJobs.stateTables;
    this.scheduleGroup = this.pacedJobs.scheduleGroup;
    this.jobs = this.pacedJobs.jobs;
    this.monitoring = this.pacedJobs.monitoring;
  }

  /** A job's config refs as the constructs AppResources made or imported; a table's configured indexes come along. */
  private usesOf(uses: EnvironmentConfig['jobs'][string]['uses']): JobUses {
    const { tables, buckets, secrets, indexNames } = this.appResources;
    // Config has read `access` into both functions' modes; a function without any is left out, as its props would be.
    const modes = <M extends string>(use: { discover: M[]; apply: M[] }) => ({
      ...(use.discover.length > 0 ? { discover: use.discover } : {}),
      ...(use.apply.length > 0 ? { apply: use.apply } : {}),
    });
    return {
      tables: Object.fromEntries(
        Object.entries(uses.tables).map(([alias, use]) => [
          alias,
          {
            table: tables[use.ref],
            ...modes(use),
            indexes: [...(indexNames[use.ref] ?? [])],
          },
        ]),
      ),
      buckets: Object.fromEntries(
        Object.entries(uses.buckets).map(([alias, use]) => [alias, { bucket: buckets[use.ref], ...modes(use) }]),
      ),
      secrets: Object.fromEntries(
        Object.entries(uses.secrets).map(([alias, use]) => [alias, { secret: secrets[use.ref] }]),
      ),
    };
  }
}
