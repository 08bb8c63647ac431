import { LocalScheduler, renderInput, ScheduleError } from '../../local/scheduler';
import type { PlannedSchedule } from '../../local/plan';

const schedule = (overrides: Partial<PlannedSchedule> = {}): PlannedSchedule => ({
  logicalId: 'Nightly',
  name: 'nightly',
  arn: 'arn:aws:scheduler:us-east-1:000000000000:schedule/default/nightly',
  group: 'default',
  expression: 'cron(0 2 * * ? *)',
  timeZone: 'Europe/London',
  enabled: true,
  targetArn: 'arn:aws:lambda:us-east-1:000000000000:function:producer',
  input: '{"scheduledTime":"<aws.scheduler.scheduled-time>","job":"payments"}',
  maximumRetryAttempts: 2,
  maximumEventAgeSeconds: 60,
  deadLetterArn: 'arn:aws:sqs:us-east-1:000000000000:schedule-dlq',
  ...overrides,
});

describe('Function: renderInput', () => {
  it('fills the scheduled time without milliseconds, and the other context attributes', () => {
    expect(
      renderInput(
        '{"t":"<aws.scheduler.scheduled-time>","a":"<aws.scheduler.schedule-arn>","n":"<aws.scheduler.attempt-number>"}',
        {
          scheduledTime: new Date('2026-11-29T02:00:00.123Z'),
          scheduleArn: 'arn:s',
          executionId: 'e',
          attempt: 3,
        },
      ),
    ).toBe('{"t":"2026-11-29T02:00:00Z","a":"arn:s","n":"3"}');
  });
});

describe('Class: LocalScheduler', () => {
  describe('Method: fire', () => {
    it('delivers the rendered input now (--now) with the business date added (--date)', async () => {
      const delivered: [string, string][] = [];
      const scheduler = new LocalScheduler({
        deliver: async (arn, input) => void delivered.push([arn, input]),
        deadLetter: async () => undefined,
      });
      scheduler.add(schedule());
      const result = await scheduler.fire('nightly', {
        scheduledTime: new Date('2026-11-29T02:00:00Z'),
        businessDate: '2026-11-27',
      });
      expect(result).toEqual({
        delivered: true,
        attempts: 1,
        input: '{"scheduledTime":"2026-11-29T02:00:00Z","job":"payments","businessDate":"2026-11-27"}',
      });
      expect(delivered).toEqual([['arn:aws:lambda:us-east-1:000000000000:function:producer', result.input]]);
    });

    it('retries per the RetryPolicy, then sends the event to the schedule DLQ with the error attributes', async () => {
      let attempts = 0;
      const dead: { arn: string; body: string; attributes: Record<string, string> }[] = [];
      const scheduler = new LocalScheduler({
        deliver: async () => {
          attempts++;
          throw new Error('Function not found: producer');
        },
        deadLetter: async (arn, body, attributes) => void dead.push({ arn, body, attributes }),
        retryDelayMs: () => 1,
      });
      scheduler.add(schedule());
      const result = await scheduler.fire('nightly', { scheduledTime: new Date('2026-11-29T02:00:00Z') });
      expect(attempts).toBe(3);
      expect(result).toEqual({
        delivered: false,
        attempts: 3,
        input: '{"scheduledTime":"2026-11-29T02:00:00Z","job":"payments"}',
        error: 'Function not found: producer',
      });
      expect(dead).toEqual([
        {
          arn: 'arn:aws:sqs:us-east-1:000000000000:schedule-dlq',
          body: '{"scheduledTime":"2026-11-29T02:00:00Z","job":"payments"}',
          attributes: {
            ERROR_CODE: 'TargetDeliveryFailed',
            ERROR_MESSAGE: 'Function not found: producer',
            EXHAUSTED_RETRY_CONDITION: 'MaximumRetryAttempts',
            RETRY_ATTEMPTS: '2',
            SCHEDULE_ARN: 'arn:aws:scheduler:us-east-1:000000000000:schedule/default/nightly',
            TARGET_ARN: 'arn:aws:lambda:us-east-1:000000000000:function:producer',
          },
        },
      ]);
    });

    it('throws for a schedule that does not exist', () => {
      const scheduler = new LocalScheduler({ deliver: async () => undefined, deadLetter: async () => undefined });
      expect(() => scheduler.fire('missing')).toThrow(new ScheduleError('Schedule missing does not exist.', 'missing'));
    });
  });

  describe('Method: start', () => {
    it('arms the next fire time of enabled schedules in their time zone, and none for disabled ones', async () => {
      const scheduler = new LocalScheduler({ deliver: async () => undefined, deadLetter: async () => undefined });
      scheduler.add(schedule());
      scheduler.add(schedule({ name: 'off', enabled: false }));
      scheduler.start();
      const [on, off] = scheduler.list();
      expect(on.state).toBe('ENABLED');
      const local = new Intl.DateTimeFormat('en-GB', {
        timeZone: 'Europe/London',
        hour: '2-digit',
        minute: '2-digit',
        hourCycle: 'h23',
      }).format(on.nextFire);
      expect(local).toBe('02:00');
      expect(off.nextFire).toBeUndefined();
      scheduler.setState('off', 'ENABLED');
      expect(scheduler.list()[1].nextFire).toEqual(on.nextFire);
      await scheduler.stop();
    });
  });

  describe('Method: add', () => {
    it('rejects a rate expression with a clear message', () => {
      const scheduler = new LocalScheduler({ deliver: async () => undefined, deadLetter: async () => undefined });
      expect(() => scheduler.add(schedule({ expression: 'rate(5 minutes)' }))).toThrow(
        'schedule nightly: only cron(...) expressions are emulated, got rate(5 minutes)',
      );
    });
  });
});
