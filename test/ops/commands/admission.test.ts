import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { admission, type AdmissionResult } from '../../../ops/commands/admission';
import type { OpsClients } from '../../../ops/clients';
import { MappingStateError } from '../../../ops/errors';
import type { OpsIo } from '../../../ops/io';
import type { StackResources } from '../../../ops/resources';
import { OpsFixture, startOpsFixture } from '../fixture';

describe('Function: admission (ops pause / ops resume)', () => {
  let f: OpsFixture;
  const scheduleState = (name: string) => f.scheduler.list().find((s) => s.schedule.name === name)!.state;

  beforeAll(async () => {
    f = await startOpsFixture(['alpha', 'beta']);
    for (const j of Object.values(f.jobs)) j.mapping.start();
  });
  afterAll(async () => {
    await f.stop();
  });
  afterEach(() => {
    jest.restoreAllMocks();
  });

  describe('Method: pause', () => {
    it('prints the planned steps and changes nothing with --dry-run', async () => {
      const out = await f.run(['pause', '--dry-run', '--json']);

      expect(out.code).toBe(0);
      const result = out.json<AdmissionResult>();
      expect(result).toMatchObject({ ok: true, command: 'pause', dryRun: true });
      expect(result.steps.map((s) => [s.job, s.kind, s.before, s.desired, s.needed, s.applied])).toEqual([
        ['alpha', 'schedule', 'ENABLED', 'DISABLED', true, false],
        ['beta', 'schedule', 'ENABLED', 'DISABLED', true, false],
        ['alpha', 'event-source-mapping', 'Enabled', 'Disabled', true, false],
        ['beta', 'event-source-mapping', 'Enabled', 'Disabled', true, false],
      ]);
      expect(scheduleState('alpha-schedule')).toBe('ENABLED');
      expect(f.jobs.alpha.mapping.state).toBe('Enabled');
    });

    it('refuses without --yes when stdin is not a TTY, and changes nothing', async () => {
      const out = await f.run(['pause', '--job', 'alpha', '--json']);

      expect(out.code).toBe(1);
      expect(out.stderr).toBe(
        'error: refusing to pause alpha (2 changes) without confirmation: stdin is not a TTY; pass --yes to confirm, or --dry-run to preview\n',
      );
      expect(out.json()).toEqual({
        ok: false,
        error: {
          name: 'ConfirmationError',
          message: 'refusing to pause alpha (2 changes) without confirmation: stdin is not a TTY; pass --yes to confirm, or --dry-run to preview',
          action: 'pause alpha (2 changes)',
          exitCode: 1,
        },
      });
      expect(scheduleState('alpha-schedule')).toBe('ENABLED');
      expect(f.jobs.alpha.mapping.state).toBe('Enabled');
    });

    it('changes nothing when the operator answers no at the prompt', async () => {
      const out = await f.run(['pause', '--job', 'alpha'], { interactive: true, answers: ['n'] });

      expect(out.code).toBe(1);
      expect(f.prompts.at(-1)).toBe('pause alpha (2 changes)? [y/N] ');
      expect(out.stderr).toBe('error: not confirmed: did not pause alpha (2 changes); nothing was changed\n');
      expect(scheduleState('alpha-schedule')).toBe('ENABLED');
    });

    it('disables the schedule before the event source mapping, and leaves the messages queued', async () => {
      const update = jest.spyOn(f.scheduler, 'update');
      const stop = jest.spyOn(f.jobs.alpha.mapping, 'stop');

      const out = await f.run(['pause', '--job', 'alpha', '--json'], { interactive: true, answers: ['y'] });

      expect(out.code).toBe(0);
      expect(out.json<AdmissionResult>().steps.map((s) => [s.kind, s.applied])).toEqual([
        ['schedule', true],
        ['event-source-mapping', true],
      ]);
      expect(update).toHaveBeenCalledTimes(1);
      expect(stop).toHaveBeenCalledTimes(1);
      expect(update.mock.invocationCallOrder[0]).toBeLessThan(stop.mock.invocationCallOrder[0]);
      expect(scheduleState('alpha-schedule')).toBe('DISABLED');
      expect(f.jobs.alpha.mapping.state).toBe('Disabled');
      // The other job is untouched.
      expect(scheduleState('beta-schedule')).toBe('ENABLED');
      expect(f.jobs.beta.mapping.state).toBe('Enabled');
      // UpdateSchedule replaces the definition: the rest of it survives the state change.
      const schedule = f.scheduler.get('alpha-schedule');
      expect([schedule.expression, schedule.timeZone, schedule.input, schedule.maximumRetryAttempts]).toEqual([
        'cron(0 2 * * ? *)',
        'Europe/Berlin',
        '{"scheduledTime":"<aws.scheduler.scheduled-time>"}',
        3,
      ]);
    });

    it('keeps messages queued while paused', async () => {
      await f.sqs.send(new SendMessageCommand({ QueueUrl: f.jobs.alpha.queueUrl, MessageBody: '{"operationId":"kept"}' }));
      // Longer than the mapping's idle poll interval: a running poller would have taken it.
      await new Promise((r) => setTimeout(r, 700));

      expect(await f.depth(f.jobs.alpha.queueUrl)).toEqual({ visible: 1, inFlight: 0 });
    });

    it('reports every step as unchanged when the job is already paused', async () => {
      const out = await f.run(['pause', '--job', 'alpha', '--json']);

      expect(out.code).toBe(0);
      expect(out.json<AdmissionResult>().steps.map((s) => [s.before, s.needed, s.applied])).toEqual([
        ['DISABLED', false, false],
        ['Disabled', false, false],
      ]);
    });
  });

  describe('Method: resume', () => {
    it('enables the event source mapping before the schedule', async () => {
      const update = jest.spyOn(f.scheduler, 'update');
      const start = jest.spyOn(f.jobs.alpha.mapping, 'start');

      const out = await f.run(['resume', '--job', 'alpha', '--yes', '--json']);

      expect(out.code).toBe(0);
      expect(out.json<AdmissionResult>().steps.map((s) => [s.kind, s.before, s.desired, s.applied])).toEqual([
        ['event-source-mapping', 'Disabled', 'Enabled', true],
        ['schedule', 'DISABLED', 'ENABLED', true],
      ]);
      expect(start.mock.invocationCallOrder[0]).toBeLessThan(update.mock.invocationCallOrder[0]);
      expect(scheduleState('alpha-schedule')).toBe('ENABLED');
      expect(f.jobs.alpha.mapping.state).toBe('Enabled');
    });

    it('prints a table of the steps without --json', async () => {
      await f.run(['pause', '--yes']);
      const out = await f.run(['resume', '--yes']);

      expect(out.code).toBe(0);
      expect(out.stdout).toMatch(/^resume\n/);
      expect(out.stdout).toContain('event-source-mapping');
      expect(out.stdout).toContain('local-betaMapping');
      expect(scheduleState('beta-schedule')).toBe('ENABLED');
      expect(f.jobs.beta.mapping.state).toBe('Enabled');
    });

    it('fails with the job list for an unknown job', async () => {
      const out = await f.run(['resume', '--job', 'gamma', '--yes']);

      expect(out.code).toBe(2);
      expect(out.stderr).toBe('error: unknown job "gamma"; PacedJobs-test has: alpha, beta\n');
    });
  });
});

// AWS answers UpdateEventSourceMapping while the mapping is still changing state; pause waits for it to settle.
describe('Function: admission against transitional mapping states', () => {
  const resources: StackResources = {
    source: 'cloudformation',
    stackName: 'PacedJobs-prod',
    tables: { idempotency: 'idem', ledger: 'ledger' },
    jobs: [
      {
        job: 'alpha',
        queueUrl: 'q',
        queueArn: 'qa',
        dlqUrl: 'd',
        dlqArn: 'da',
        producerFunctionName: 'p',
        consumerFunctionName: 'c',
        scheduleName: 'alpha-schedule',
        eventSourceMappingUuid: 'uuid-1',
      },
    ],
    clients: {},
  };

  function context(mappingStates: string[]) {
    const sent: string[] = [];
    const states = [...mappingStates];
    const send = jest.fn(async (command: { constructor: { name: string } }) => {
      sent.push(command.constructor.name);
      switch (command.constructor.name) {
        case 'GetScheduleCommand':
          return { Name: 'alpha-schedule', State: 'ENABLED', ScheduleExpression: 'cron(0 2 * * ? *)', FlexibleTimeWindow: { Mode: 'OFF' }, Target: { Arn: 'a', RoleArn: 'r' } };
        case 'GetEventSourceMappingCommand':
          return { UUID: 'uuid-1', State: states.length > 1 ? states.shift() : states[0] };
        default:
          return {};
      }
    });
    const clients = { sqs: { send }, dynamo: { send }, lambda: { send }, scheduler: { send }, destroy: () => undefined } as unknown as OpsClients;
    let clock = 0;
    const io: OpsIo = {
      stdout: () => undefined,
      stderr: () => undefined,
      interactive: false,
      ask: async () => '',
      now: () => new Date(clock),
      sleep: async (ms) => {
        clock += ms;
      },
    };
    return { ctx: { resources, clients, io }, sent };
  }

  it('waits until the mapping reports Disabled', async () => {
    const { ctx, sent } = context(['Enabled', 'Disabling', 'Disabling', 'Disabled']);

    const result = await admission(ctx, 'pause', { yes: true, mappingPollMs: 1000, mappingTimeoutMs: 10_000 });

    expect(result.steps.map((s) => s.applied)).toEqual([true, true]);
    expect(sent).toEqual([
      'GetScheduleCommand',
      'GetEventSourceMappingCommand',
      'UpdateScheduleCommand',
      'UpdateEventSourceMappingCommand',
      'GetEventSourceMappingCommand',
      'GetEventSourceMappingCommand',
      'GetEventSourceMappingCommand',
    ]);
  });

  it('throws when the mapping does not settle in time', async () => {
    const { ctx } = context(['Enabled', 'Disabling']);

    await expect(admission(ctx, 'pause', { yes: true, mappingPollMs: 1000, mappingTimeoutMs: 3000 })).rejects.toThrow(
      new MappingStateError('event source mapping uuid-1 is still Disabling after 3000 ms (wanted Disabled); check it and re-run', 'uuid-1', 'Disabling'),
    );
  });
});
