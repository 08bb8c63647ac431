import type { StatusResult } from '../../../ops/commands/status';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { admission, type AdmissionResult } from '../../../ops/commands/admission';
import type { OpsClients } from '../../../ops/clients';
import { ConfirmationError, MappingStateError } from '../../../ops/errors';
import type { OpsIo } from '../../../ops/io';
import type { StackResources } from '../../../ops/resources';
import { holdsFor, waitFor } from '../../../local/waitFor';
import { type OpsFixture, startOpsFixture, TARGET } from '../fixture';

/** A run's next step, as the producer sends it to the admission queue. */
const keptStep = {
  kind: 'admission-step',
  batchId: 'alpha:2026-11-01:20261101T010000Z',
  businessDate: '2026-11-01',
  step: 3,
  scheduledTime: '2026-11-01T01:00:00Z',
};

describe('Function: admission (ops pause / ops resume)', () => {
  let f: OpsFixture;
  const scheduleState = (name: string) => f.scheduler.list().find((s) => s.schedule.name === name)!.state;

  beforeAll(async () => {
    f = await startOpsFixture(['alpha', 'beta'], { running: true });
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
      expect(result.steps.map((s) => [s.job, s.kind, s.target, s.before, s.desired, s.needed, s.applied])).toEqual([
        ['alpha', 'schedule', 'alpha-schedule', 'ENABLED', 'DISABLED', true, false],
        ['beta', 'schedule', 'beta-schedule', 'ENABLED', 'DISABLED', true, false],
        ['alpha', 'admission-mapping', 'local-alphaAdmissionMapping', 'Enabled', 'Disabled', true, false],
        ['beta', 'admission-mapping', 'local-betaAdmissionMapping', 'Enabled', 'Disabled', true, false],
        ['alpha', 'event-source-mapping', 'local-alphaMapping', 'Enabled', 'Disabled', true, false],
        ['beta', 'event-source-mapping', 'local-betaMapping', 'Enabled', 'Disabled', true, false],
      ]);
      expect(scheduleState('alpha-schedule')).toBe('ENABLED');
      expect(f.jobs.alpha.admissionMapping.state).toBe('Enabled');
      expect(f.jobs.alpha.mapping.state).toBe('Enabled');
    });

    it('refuses without --yes when stdin is not a TTY, and changes nothing', async () => {
      const out = await f.run(['pause', '--job', 'alpha', '--json']);

      expect(out.code).toBe(1);
      expect(out.stderr).toBe(
        `error: refusing to pause alpha (3 changes) on ${TARGET} without confirmation: stdin is not a TTY; pass --yes to confirm, or --dry-run to preview\n`,
      );
      expect(out.json()).toEqual({
        ok: false,
        error: {
          name: 'ConfirmationError',
          message: `refusing to pause alpha (3 changes) on ${TARGET} without confirmation: stdin is not a TTY; pass --yes to confirm, or --dry-run to preview`,
          action: 'pause alpha (3 changes)',
          exitCode: 1,
        },
      });
      expect(scheduleState('alpha-schedule')).toBe('ENABLED');
      expect(f.jobs.alpha.mapping.state).toBe('Enabled');
    });

    it('changes nothing when the operator answers no at the prompt', async () => {
      const out = await f.run(['pause', '--job', 'alpha'], { interactive: true, answers: ['n'] });

      expect(out.code).toBe(1);
      expect(f.prompts.at(-1)).toBe(`pause alpha (3 changes) on ${TARGET}? [y/N] `);
      expect(out.stderr).toBe(
        `error: not confirmed: did not pause alpha (3 changes) on ${TARGET}; nothing was changed\n`,
      );
      expect(scheduleState('alpha-schedule')).toBe('ENABLED');
    });

    it('disables the schedule, then the admission mapping, then the consumer mapping', async () => {
      const update = jest.spyOn(f.scheduler, 'update');
      const stopAdmission = jest.spyOn(f.jobs.alpha.admissionMapping, 'stop');
      const stopConsumer = jest.spyOn(f.jobs.alpha.mapping, 'stop');

      const out = await f.run(['pause', '--job', 'alpha', '--json'], { interactive: true, answers: ['y'] });

      expect(out.code).toBe(0);
      expect(out.json<AdmissionResult>().steps.map((s) => [s.kind, s.applied])).toEqual([
        ['schedule', true],
        ['admission-mapping', true],
        ['event-source-mapping', true],
      ]);
      expect(out.stderr).toBe(
        [
          'pause: alpha schedule alpha-schedule ENABLED -> DISABLED',
          'pause: alpha admission-mapping local-alphaAdmissionMapping Enabled -> Disabled',
          'pause: alpha event-source-mapping local-alphaMapping Enabled -> Disabled',
          '',
        ].join('\n'),
      );
      expect([update, stopAdmission, stopConsumer].map((m) => m.mock.calls.length)).toEqual([1, 1, 1]);
      expect(update.mock.invocationCallOrder[0]).toBeLessThan(stopAdmission.mock.invocationCallOrder[0]);
      expect(stopAdmission.mock.invocationCallOrder[0]).toBeLessThan(stopConsumer.mock.invocationCallOrder[0]);
      expect(scheduleState('alpha-schedule')).toBe('DISABLED');
      expect(f.jobs.alpha.admissionMapping.state).toBe('Disabled');
      expect(f.jobs.alpha.mapping.state).toBe('Disabled');
      // The other job is untouched.
      expect(scheduleState('beta-schedule')).toBe('ENABLED');
      expect(f.jobs.beta.admissionMapping.state).toBe('Enabled');
      expect(f.jobs.beta.mapping.state).toBe('Enabled');
      // `ops status` then shows alpha paused and beta running, switch by switch.
      const status = await f.run(['status', '--json']);
      expect(status.json<StatusResult>().jobs.map((j) => [j.job, j.admission])).toEqual([
        [
          'alpha',
          { schedule: 'DISABLED', admissionMapping: 'Disabled', consumerMapping: 'Disabled', summary: 'paused' },
        ],
        ['beta', { schedule: 'ENABLED', admissionMapping: 'Enabled', consumerMapping: 'Enabled', summary: 'running' }],
      ]);
      // UpdateSchedule replaces the definition: the rest of it survives the state change.
      const schedule = f.scheduler.get('alpha-schedule');
      expect([schedule.expression, schedule.timeZone, schedule.input, schedule.maximumRetryAttempts]).toEqual([
        'cron(0 2 * * ? *)',
        'Europe/Berlin',
        '{"scheduledTime":"<aws.scheduler.scheduled-time>"}',
        3,
      ]);
    });

    it('keeps messages and the next admission step queued while paused', async () => {
      await f.sqs.send(
        new SendMessageCommand({ QueueUrl: f.jobs.alpha.queueUrl, MessageBody: '{"operationId":"kept"}' }),
      );
      await f.sqs.send(
        new SendMessageCommand({ QueueUrl: f.jobs.alpha.admissionQueueUrl, MessageBody: JSON.stringify(keptStep) }),
      );
      // The wait is the claim: for longer than the mappings' idle poll interval, where a running poller would have
      // taken them, both stay queued and nothing reaches the producer.
      await holdsFor(
        "alpha's work and admission queues to keep their messages while paused",
        async () =>
          (await f.depth(f.jobs.alpha.queueUrl)).visible === 1 &&
          (await f.depth(f.jobs.alpha.admissionQueueUrl)).visible === 1 &&
          f.admissionDeliveries.length === 0,
        { forMs: 700 },
      );

      expect(await f.depth(f.jobs.alpha.queueUrl)).toEqual({ visible: 1, inFlight: 0 });
      expect(await f.depth(f.jobs.alpha.admissionQueueUrl)).toEqual({ visible: 1, inFlight: 0 });
      expect(f.admissionDeliveries).toEqual([]);
    });

    it('reports every step as unchanged when the job is already paused', async () => {
      const out = await f.run(['pause', '--job', 'alpha', '--json']);

      expect(out.code).toBe(0);
      expect(out.json<AdmissionResult>().steps.map((s) => [s.before, s.needed, s.applied])).toEqual([
        ['DISABLED', false, false],
        ['Disabled', false, false],
        ['Disabled', false, false],
      ]);
    });
  });

  describe('Method: resume', () => {
    it('enables the consumer mapping, then the admission mapping, then the schedule, and the queued step goes on', async () => {
      const update = jest.spyOn(f.scheduler, 'update');
      const startConsumer = jest.spyOn(f.jobs.alpha.mapping, 'start');
      const startAdmission = jest.spyOn(f.jobs.alpha.admissionMapping, 'start');

      const out = await f.run(['resume', '--job', 'alpha', '--yes', '--json']);

      expect(out.code).toBe(0);
      expect(out.json<AdmissionResult>().steps.map((s) => [s.kind, s.before, s.desired, s.applied])).toEqual([
        ['event-source-mapping', 'Disabled', 'Enabled', true],
        ['admission-mapping', 'Disabled', 'Enabled', true],
        ['schedule', 'DISABLED', 'ENABLED', true],
      ]);
      expect(startConsumer.mock.invocationCallOrder[0]).toBeLessThan(startAdmission.mock.invocationCallOrder[0]);
      expect(startAdmission.mock.invocationCallOrder[0]).toBeLessThan(update.mock.invocationCallOrder[0]);
      expect(scheduleState('alpha-schedule')).toBe('ENABLED');
      expect(f.jobs.alpha.admissionMapping.state).toBe('Enabled');
      expect(f.jobs.alpha.mapping.state).toBe('Enabled');
      // The step that waited through the pause reaches the producer, which goes on from the run's ledger cursor.
      await waitFor('the kept step delivered to the producer', () => f.admissionDeliveries.length > 0, {
        timeoutMs: 10_000,
      });
      expect(f.admissionDeliveries).toEqual([{ job: 'alpha', body: keptStep }]);
    });

    it('prints a table of the steps without --json', async () => {
      await f.run(['pause', '--yes']);
      const out = await f.run(['resume', '--yes']);

      expect(out.code).toBe(0);
      expect(out.stdout).toMatch(/^resume\n/);
      const rows = out.stdout
        .split('\n')
        .filter((l) => l.startsWith('│ '))
        .map((l) => l.replace(/\s+/g, ' '));
      expect(rows).toEqual([
        '│ step │ job │ what │ target │ before │ after │',
        '│ 1 │ alpha │ event-source-mapping │ local-alphaMapping │ Disabled │ Enabled │',
        '│ 2 │ beta │ event-source-mapping │ local-betaMapping │ Disabled │ Enabled │',
        '│ 3 │ alpha │ admission-mapping │ local-alphaAdmissionMapping │ Disabled │ Enabled │',
        '│ 4 │ beta │ admission-mapping │ local-betaAdmissionMapping │ Disabled │ Enabled │',
        '│ 5 │ alpha │ schedule │ alpha-schedule │ DISABLED │ ENABLED │',
        '│ 6 │ beta │ schedule │ beta-schedule │ DISABLED │ ENABLED │',
      ]);
      expect(out.stdout).toMatch(
        /\neach run admitting goes on from the cursor in its ledger item when its next step comes due \(see `ops status`\)\n$/,
      );
      expect(scheduleState('beta-schedule')).toBe('ENABLED');
      expect(f.jobs.beta.admissionMapping.state).toBe('Enabled');
      expect(f.jobs.beta.mapping.state).toBe('Enabled');
    });

    it('fails with the job list for an unknown job', async () => {
      const out = await f.run(['resume', '--job', 'gamma', '--yes']);

      expect(out.code).toBe(2);
      expect(out.stderr).toBe('error: unknown job "gamma"; PacedJobs-test has: alpha, beta\n');
    });
  });
});

// AWS answers UpdateEventSourceMapping while the mapping is still changing state; pause waits for each to settle.
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
        scheduleGroupName: 'paced-jobs-prod',
        eventSourceMappingUuid: 'consumer-uuid',
        admissionQueueUrl: 'aq',
        admissionQueueArn: 'aqa',
        admissionMappingUuid: 'admission-uuid',
      },
    ],
    clients: {},
  };

  /** Each mapping answers GetEventSourceMapping with its states in turn, then keeps the last. */
  function context(mappingStates: Record<string, string[]>) {
    const sent: string[] = [];
    const schedulerInputs: [string, Record<string, unknown>][] = [];
    const states = Object.fromEntries(Object.entries(mappingStates).map(([uuid, list]) => [uuid, [...list]]));
    const send = jest.fn(async (command: { constructor: { name: string }; input: { UUID?: string } }) => {
      const name = command.constructor.name;
      sent.push(command.input.UUID ? `${name} ${command.input.UUID}` : name);
      if (name.endsWith('ScheduleCommand')) schedulerInputs.push([name, command.input]);
      switch (name) {
        case 'GetScheduleCommand':
          return {
            Name: 'alpha-schedule',
            State: 'ENABLED',
            ScheduleExpression: 'cron(0 2 * * ? *)',
            FlexibleTimeWindow: { Mode: 'OFF' },
            Target: { Arn: 'a', RoleArn: 'r' },
          };
        case 'GetEventSourceMappingCommand': {
          const list = states[command.input.UUID!];
          return { UUID: command.input.UUID, State: list.length > 1 ? list.shift() : list[0] };
        }
        default:
          return {};
      }
    });
    const clients = {
      sqs: { send },
      dynamo: { send },
      lambda: { send },
      scheduler: { send },
      destroy: () => undefined,
    } as unknown as OpsClients;
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
    return { ctx: { resources, clients, io }, sent, schedulerInputs };
  }

  it("addresses the schedule in the job's group on GetSchedule and UpdateSchedule", async () => {
    const { ctx, schedulerInputs } = context({
      'admission-uuid': ['Enabled', 'Disabled'],
      'consumer-uuid': ['Enabled', 'Disabled'],
    });

    await admission(ctx, 'pause', { yes: true, mappingPollMs: 1000, mappingTimeoutMs: 10_000 });

    // The GetSchedule answer above names no group: the UpdateSchedule's group is the job's own, from the stack outputs.
    expect(schedulerInputs).toEqual([
      ['GetScheduleCommand', { Name: 'alpha-schedule', GroupName: 'paced-jobs-prod' }],
      [
        'UpdateScheduleCommand',
        expect.objectContaining({ Name: 'alpha-schedule', GroupName: 'paced-jobs-prod', State: 'DISABLED' }),
      ],
    ]);
  });

  it('waits until each mapping reports Disabled before the next step', async () => {
    const { ctx, sent } = context({
      'admission-uuid': ['Enabled', 'Disabling', 'Disabled'],
      'consumer-uuid': ['Enabled', 'Disabling', 'Disabling', 'Disabled'],
    });

    const result = await admission(ctx, 'pause', { yes: true, mappingPollMs: 1000, mappingTimeoutMs: 10_000 });

    expect(result.steps.map((s) => [s.kind, s.applied])).toEqual([
      ['schedule', true],
      ['admission-mapping', true],
      ['event-source-mapping', true],
    ]);
    expect(sent).toEqual([
      'GetScheduleCommand',
      'GetEventSourceMappingCommand admission-uuid',
      'GetEventSourceMappingCommand consumer-uuid',
      'UpdateScheduleCommand',
      'UpdateEventSourceMappingCommand admission-uuid',
      'GetEventSourceMappingCommand admission-uuid',
      'GetEventSourceMappingCommand admission-uuid',
      'UpdateEventSourceMappingCommand consumer-uuid',
      'GetEventSourceMappingCommand consumer-uuid',
      'GetEventSourceMappingCommand consumer-uuid',
      'GetEventSourceMappingCommand consumer-uuid',
    ]);
  });

  it('refuses --yes alone on a protected environment, naming stack, account, region and the --confirm it needs, and changes nothing', async () => {
    const prod = { ...resources, environment: 'prod', region: 'eu-west-1', accountId: '123456789012', protected: true };
    const { ctx, sent } = context({ 'admission-uuid': ['Enabled'], 'consumer-uuid': ['Enabled'] });
    const guarded = { ...ctx, resources: prod };

    await expect(admission(guarded, 'pause', { yes: true })).rejects.toThrow(
      new ConfirmationError(
        'refusing to pause alpha (3 changes) on stack PacedJobs-prod, account 123456789012, region eu-west-1: environment prod is protected; ' +
          'pass --confirm prod as well as --yes',
        'pause alpha (3 changes)',
      ),
    );
    await expect(admission(guarded, 'pause', { yes: true, confirm: 'staging' })).rejects.toThrow(
      '--confirm staging does not match environment prod: did not pause alpha (3 changes) on stack PacedJobs-prod, account 123456789012, region eu-west-1; nothing was changed',
    );
    expect(sent.filter((c) => c.startsWith('Update'))).toEqual([]);

    const confirmed = context({ 'admission-uuid': ['Enabled', 'Disabled'], 'consumer-uuid': ['Enabled', 'Disabled'] });
    await admission({ ...confirmed.ctx, resources: prod }, 'pause', {
      yes: true,
      confirm: 'prod',
      mappingPollMs: 1000,
      mappingTimeoutMs: 10_000,
    });
    expect(confirmed.sent.filter((c) => c.startsWith('Update'))).toEqual([
      'UpdateScheduleCommand',
      'UpdateEventSourceMappingCommand admission-uuid',
      'UpdateEventSourceMappingCommand consumer-uuid',
    ]);
  });

  it('throws when the admission mapping does not settle in time, before touching the consumer', async () => {
    const { ctx, sent } = context({ 'admission-uuid': ['Enabled', 'Disabling'], 'consumer-uuid': ['Enabled'] });

    await expect(admission(ctx, 'pause', { yes: true, mappingPollMs: 1000, mappingTimeoutMs: 3000 })).rejects.toThrow(
      new MappingStateError(
        'event source mapping admission-uuid is still Disabling after 3000 ms (wanted Disabled); check it and re-run',
        'admission-uuid',
        'Disabling',
      ),
    );
    expect(sent).not.toContain('UpdateEventSourceMappingCommand consumer-uuid');
  });
});
