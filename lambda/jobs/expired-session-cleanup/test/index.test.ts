import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, type DynamoDBDocumentClient, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { resetClients } from '../../../adapters/clients';
import { InvalidOperationIdError, PermanentError, RetryableError, SettingsError } from '../../../job';
import { type ExpiredSessionDeps, createDeps, expiredSessionsOperationId, job, sessionCutoff } from '..';
import { demoSessions, demoTenants, session, tenant } from '../items';
import { type LocalAws, startLocalAws } from '../../../../test/support/aws';
import { createTable, discoverAll, putAll, runtimeSettings, scanAll } from '../../../../test/support/jobs';
import { TABLES } from './tables';

const DATE = '2026-11-28';
const NOW = new Date('2026-11-29T01:15:00.000Z');
const CUTOFF = '2026-10-29T00:00:00.000Z';

const settings = (values: Record<string, number> = { sessionMaxAgeDays: 30, deleteChunkSize: 25 }) =>
  runtimeSettings({
    jobName: 'expired-session-cleanup',
    tables: { tenants: TABLES.tenants.name, sessions: TABLES.sessions.name },
    settings: values,
  });

describe('Function: expiredSessionsOperationId', () => {
  it('builds <tenantId>:expired-sessions:<businessDate>', () => {
    expect(expiredSessionsOperationId({ tenantId: 't-1', businessDate: '2026-11-28' })).toBe(
      't-1:expired-sessions:2026-11-28',
    );
  });

  it('throws on a tenant ID with a space', () => {
    expect(() => expiredSessionsOperationId({ tenantId: 't 1', businessDate: '2026-11-28' })).toThrow(
      new InvalidOperationIdError(
        'tenant ID "t 1" cannot be part of an operation ID: it must be 1 to 128 characters of letters, digits and _ . @ # / + = - starting with a letter or digit',
      ),
    );
  });
});

describe('Job: expired-session-cleanup', () => {
  let aws: LocalAws;
  let base: ExpiredSessionDeps;

  const sessionsOf = async (tenantId: string) =>
    (await scanAll(base.documents, TABLES.sessions.name))
      .filter((s) => s.tenantId === tenantId)
      .map((s) => s.sessionId as string)
      .sort();
  const applyFor = (
    deps: ExpiredSessionDeps,
    tenantId: string,
    remainingTimeMs: () => number = () => 60_000,
    operationId = `${tenantId}:expired-sessions:${DATE}`,
  ) => job.apply(deps, { operationId, batchId: 'b', businessDate: DATE, resource: { tenantId }, remainingTimeMs });

  /** Wraps the document client to watch (and, for races, act on) each command the job sends. */
  const watched = (before: (command: object) => Promise<void>): DynamoDBDocumentClient =>
    ({
      send: async (command: object) => {
        await before(command);
        return base.documents.send(command as never);
      },
    }) as unknown as DynamoDBDocumentClient;

  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    const raw = new DynamoDBClient({});
    await createTable(raw, TABLES.tenants);
    await createTable(raw, TABLES.sessions);
    raw.destroy();
    base = createDeps(settings());
    await putAll(base.documents, TABLES.tenants.name, demoTenants(7));
  });
  afterAll(async () => {
    resetClients();
    await aws.stop();
  });

  describe('Method: createDeps', () => {
    it('throws naming every missing or out-of-range setting', () => {
      expect(() =>
        createDeps(
          runtimeSettings({
            jobName: 'expired-session-cleanup',
            tables: { tenants: 't' },
            settings: { deleteChunkSize: 0 },
          }),
        ),
      ).toThrow(
        new SettingsError(
          'expired-session-cleanup: job settings are incomplete: tables.sessions is missing (it has: tenants); settings.sessionMaxAgeDays must be an integer from 1 to 3650 (got nothing); settings.deleteChunkSize must be an integer from 1 to 100 (got 0)',
        ),
      );
    });

    it('reads the configured age and chunk size', () => {
      expect({ maxAgeDays: base.maxAgeDays, chunkSize: base.chunkSize }).toEqual({ maxAgeDays: 30, chunkSize: 25 });
    });
  });

  describe('Function: sessionCutoff', () => {
    it('is the start of the business date (UTC) minus the maximum age', () => {
      expect(sessionCutoff(DATE, 30)).toBe(CUTOFF);
      expect(sessionCutoff('2024-03-01', 1)).toBe('2024-02-29T00:00:00.000Z');
    });
  });

  describe('Method: discover', () => {
    it('gives one operation per tenant across pages, at most pageSize at a time', async () => {
      const { operations, pageSizes } = await discoverAll(job, base, { businessDate: DATE, pageSize: 3, now: NOW });
      const tenants = demoTenants(7).map((t) => t.tenantId);
      expect(operations.map((o) => o.resource.tenantId).sort()).toEqual(tenants);
      expect(operations.map((o) => o.operationId).sort()).toEqual(tenants.map((t) => `${t}:expired-sessions:${DATE}`));
      expect(Math.max(...pageSizes)).toBeLessThanOrEqual(3);
    });

    it('yields the same operation IDs on a re-run', async () => {
      const a = await discoverAll(job, base, { businessDate: DATE, pageSize: 2, now: NOW });
      const b = await discoverAll(job, base, { businessDate: DATE, pageSize: 100, now: NOW });
      expect(b.operations).toEqual(a.operations);
    });

    it('hands back a tenant whose ID cannot be part of an operation ID, with its key and reason, and discovers the rest', async () => {
      await putAll(base.documents, TABLES.tenants.name, [tenant('tenant:bad')]);
      try {
        const page = await job.discover(base, { businessDate: DATE, pageSize: 100, now: NOW });

        expect(page.operations.map((o) => o.resource.tenantId).sort()).toEqual(demoTenants(7).map((t) => t.tenantId));
        expect(page.invalid).toEqual([
          {
            key: 'tenant:bad',
            reason:
              'tenant ID "tenant:bad" cannot be part of an operation ID: it must be 1 to 128 characters of letters, digits and _ . @ # / + = - starting with a letter or digit',
          },
        ]);
      } finally {
        await base.documents.send(
          new DeleteCommand({ TableName: TABLES.tenants.name, Key: { tenantId: 'tenant:bad' } }),
        );
      }
    });

    it('throws on a cursor that is not a tenants key', async () => {
      const cursor = Buffer.from(JSON.stringify({ paymentId: 'p' })).toString('base64url');
      await expect(job.discover(base, { businessDate: DATE, cursor, pageSize: 3, now: NOW })).rejects.toThrow(
        'invalid cursor: expected key attributes tenantId',
      );
    });
  });

  describe('Method: apply', () => {
    it('deletes every expired session of the tenant in bounded chunks, and nothing else', async () => {
      await putAll(base.documents, TABLES.sessions.name, [
        ...demoSessions('tenant-001', CUTOFF, { expired: 60, active: 5 }),
        ...demoSessions('tenant-002', CUTOFF, { expired: 3, active: 0 }),
        session({ tenantId: 'tenant-001', sessionId: 's-edge', lastSeenAt: CUTOFF }),
      ]);
      const limits: number[] = [];
      let inFlight = 0;
      let maxInFlight = 0;
      const deps = {
        ...base,
        documents: watched(async (command) => {
          if (command instanceof QueryCommand) limits.push(command.input.Limit ?? Infinity);
          if (command instanceof DeleteCommand) {
            inFlight += 1;
            maxInFlight = Math.max(maxInFlight, inFlight);
            // Not a wait: a delete that takes a moment, so deletes sent together overlap and maxInFlight counts them.
            await new Promise((r) => setTimeout(r, 1));
            inFlight -= 1;
          }
        }),
      };
      await expect(applyFor(deps, 'tenant-001')).resolves.toEqual({
        outcome: 'applied',
        detail: { deleted: 60, kept: 0, cutoff: CUTOFF },
      });
      expect(await sessionsOf('tenant-001')).toEqual([
        's-edge',
        's-new-0001',
        's-new-0002',
        's-new-0003',
        's-new-0004',
        's-new-0005',
      ]);
      expect(await sessionsOf('tenant-002')).toHaveLength(3);
      expect(limits.every((l) => l === 25)).toBe(true);
      expect(limits.length).toBeGreaterThanOrEqual(3);
      expect(maxInFlight).toBeLessThanOrEqual(25);
    });

    it('is already done when nothing has expired', async () => {
      await expect(applyFor(base, 'tenant-001')).resolves.toEqual({
        outcome: 'already-done',
        detail: { deleted: 0, kept: 0, cutoff: CUTOFF },
      });
    });

    it('keeps a session refreshed after the index was read', async () => {
      await putAll(base.documents, TABLES.sessions.name, demoSessions('tenant-003', CUTOFF, { expired: 4, active: 0 }));
      let refreshed = false;
      const deps = {
        ...base,
        documents: watched(async (command) => {
          if (command instanceof DeleteCommand && command.input.Key?.sessionId === 's-old-0002' && !refreshed) {
            refreshed = true;
            await base.documents.send(
              new UpdateCommand({
                TableName: TABLES.sessions.name,
                Key: { tenantId: 'tenant-003', sessionId: 's-old-0002' },
                UpdateExpression: 'SET lastSeenAt = :now',
                ExpressionAttributeValues: { ':now': NOW.toISOString() },
              }),
            );
          }
        }),
      };
      await expect(applyFor(deps, 'tenant-003')).resolves.toEqual({
        outcome: 'applied',
        detail: { deleted: 3, kept: 1, cutoff: CUTOFF },
      });
      expect(await sessionsOf('tenant-003')).toEqual(['s-old-0002']);
    });

    it('stops with RetryableError when time runs short, and a retry finishes the rest', async () => {
      await putAll(
        base.documents,
        TABLES.sessions.name,
        demoSessions('tenant-004', CUTOFF, { expired: 40, active: 1 }),
      );
      const budget = [60_000, 2_000];
      const error = await applyFor(base, 'tenant-004', () => budget.shift() ?? 0).catch(
        (e: unknown) => e as RetryableError,
      );
      expect(error).toBeInstanceOf(RetryableError);
      expect((error as RetryableError).message).toBe(
        'tenant tenant-004: stopped after deleting 25 expired sessions with 2000 ms left; a retry continues with the rest',
      );
      expect(await sessionsOf('tenant-004')).toHaveLength(16);
      await expect(applyFor(base, 'tenant-004')).resolves.toEqual({
        outcome: 'applied',
        detail: { deleted: 15, kept: 0, cutoff: CUTOFF },
      });
      expect(await sessionsOf('tenant-004')).toEqual(['s-new-0001']);
    });

    it('refuses a business date whose cutoff is later than now minus the maximum age, by its own clock, deleting nothing', async () => {
      // Sessions seen up to a day ago: all active by the rule, all older than a cutoff a year ahead.
      await putAll(
        base.documents,
        TABLES.sessions.name,
        demoSessions('tenant-006', '2026-11-29T01:00:00.000Z', { expired: 24, active: 0 }),
      );
      const deps = { ...base, now: () => NOW };
      const applyOn = (businessDate: string) =>
        job.apply(deps, {
          operationId: `tenant-006:expired-sessions:${businessDate}`,
          batchId: 'b',
          businessDate,
          resource: { tenantId: 'tenant-006' },
          remainingTimeMs: () => 60_000,
        });

      const typo = await applyOn('2027-11-28').catch((e: unknown) => e as PermanentError);
      const tomorrow = await applyOn('2026-11-30').catch((e: unknown) => e as PermanentError);

      expect(typo).toBeInstanceOf(PermanentError);
      expect((typo as PermanentError).message).toBe(
        'tenant tenant-006: business date 2027-11-28 is in the future: its cutoff 2027-10-29T00:00:00.000Z is later than now minus 30 days (2026-10-30T01:15:00.000Z); nothing deleted',
      );
      expect((typo as PermanentError).detail).toEqual({
        tenantId: 'tenant-006',
        businessDate: '2027-11-28',
        cutoff: '2027-10-29T00:00:00.000Z',
        now: NOW.toISOString(),
      });
      expect((tomorrow as PermanentError).message).toBe(
        'tenant tenant-006: business date 2026-11-30 is in the future: its cutoff 2026-10-31T00:00:00.000Z is later than now minus 30 days (2026-10-30T01:15:00.000Z); nothing deleted',
      );
      expect(await sessionsOf('tenant-006')).toHaveLength(24);
      // Today (UTC) is the latest date whose cutoff is not ahead of now minus the age: it runs, and finds none expired.
      await expect(applyOn('2026-11-29')).resolves.toEqual({
        outcome: 'already-done',
        detail: { deleted: 0, kept: 0, cutoff: '2026-10-30T00:00:00.000Z' },
      });
      expect(await sessionsOf('tenant-006')).toHaveLength(24);
    });

    it('throws PermanentError when the operation ID is for another date', async () => {
      const error = await applyFor(base, 'tenant-005', () => 60_000, 'tenant-005:expired-sessions:2026-11-27').catch(
        (e: unknown) => e as PermanentError,
      );
      expect(error).toBeInstanceOf(PermanentError);
      expect((error as PermanentError).message).toBe(
        'operation ID "tenant-005:expired-sessions:2026-11-27" does not match its resource (expected "tenant-005:expired-sessions:2026-11-28")',
      );
    });
  });
});
