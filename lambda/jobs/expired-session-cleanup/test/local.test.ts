import { createDeps, job } from '..';
import { fixture, type SeededSessions } from '../local';
import { FixtureError, loadFixture, type ObservedWrite, type SeededDemo } from '../../../../local/fixture';
import { discoverAll, runtimeSettings, scanAll, useFixtureServers } from '../../../../test/support/jobs';
import { TABLES } from './tables';

const DATE = '2026-11-28';
/** The business date's start minus 30 days. */
const CUTOFF = '2026-10-29T00:00:00.000Z';
const TENANTS = TABLES.tenants.name;
const SESSIONS = TABLES.sessions.name;
const settings = (over: Parameters<typeof runtimeSettings>[0] = {}) =>
  runtimeSettings({
    jobName: 'expired-session-cleanup',
    tables: { tenants: TENANTS, sessions: SESSIONS },
    settings: { sessionMaxAgeDays: 30, deleteChunkSize: 25 },
    ...over,
  });

const del = (at: number, tenantId: string, sessionId: string, resource = SESSIONS): ObservedWrite => ({
  at,
  service: 'dynamodb',
  action: 'DeleteItem',
  resource,
  key: { tenantId, sessionId },
});

describe('Fixture: expired-session-cleanup', () => {
  const servers = useFixtureServers({
    jobName: 'expired-session-cleanup',
    settings: () => settings(),
    businessDate: DATE,
    tables: [TABLES.tenants, TABLES.sessions],
  });
  const context = servers.context;

  it("loads through the local tools' loader by the job's folder name", () => {
    expect(loadFixture(process.cwd(), 'expired-session-cleanup')).toBe(fixture);
    expect(fixture).toMatchObject({ unit: 'tenants', defaultCount: 10 });
    expect(fixture.downstream).toBeUndefined();
  });

  describe('Method: seed', () => {
    it("writes tenants with 3 expired and 2 active sessions each, on either side of the job's cutoff", async () => {
      const seeded = await fixture.seed(context(), 6);
      expect(seeded.summary).toBe('6 tenants (18 expired sessions)');
      expect(seeded.expectedOperations).toEqual([
        'tenant-001',
        'tenant-002',
        'tenant-003',
        'tenant-004',
        'tenant-005',
        'tenant-006',
      ]);
      const state = seeded.state as SeededSessions;
      expect(state.expiredSessions).toHaveLength(18);
      expect(state.activeSessions).toHaveLength(12);
      expect(state.expiredSessions.filter((s) => s.startsWith('tenant-001/')).sort()).toEqual([
        'tenant-001/s-old-0001',
        'tenant-001/s-old-0002',
        'tenant-001/s-old-0003',
      ]);

      expect((await scanAll(servers.documents(), TENANTS)).map((t) => t.tenantId).sort()).toEqual(
        seeded.expectedOperations,
      );
      const sessions = await scanAll(servers.documents(), SESSIONS);
      const byKey = new Map(sessions.map((s) => [`${s.tenantId}/${s.sessionId}`, String(s.lastSeenAt)]));
      expect([...byKey.keys()].sort()).toEqual([...state.expiredSessions, ...state.activeSessions].sort());
      expect(state.expiredSessions.every((k) => byKey.get(k)! < CUTOFF)).toBe(true);
      expect(state.activeSessions.every((k) => byKey.get(k)! > CUTOFF)).toBe(true);

      const { operations } = await discoverAll(job, createDeps(settings()), {
        businessDate: DATE,
        pageSize: 4,
        now: new Date('2026-11-29T01:15:00.000Z'),
      });
      expect(operations.map((o) => fixture.operationKeyOf(o.resource)).sort()).toEqual(seeded.expectedOperations);
    });

    it('throws when the job has no numeric sessionMaxAgeDays', async () => {
      await expect(
        fixture.seed(context({ settings: settings({ settings: { deleteChunkSize: 25 } }) }), 1),
      ).rejects.toThrow(
        new FixtureError(
          'job expired-session-cleanup has no numeric settings.sessionMaxAgeDays; cannot seed it',
          'expired-session-cleanup',
        ),
      );
    });

    it('throws naming the missing table alias', async () => {
      await expect(fixture.seed(context({ settings: settings({ tables: { tenants: TENANTS } }) }), 1)).rejects.toThrow(
        'job expired-session-cleanup has no tables.sessions in its JOB_SETTINGS; cannot seed it',
      );
    });
  });

  describe('Method: effects', () => {
    const seeded: SeededDemo = {
      expectedOperations: ['tenant-001', 'tenant-002', 'tenant-003'],
      summary: '3 tenants (4 expired sessions)',
      state: {
        expiredSessions: [
          'tenant-001/s-old-0001',
          'tenant-001/s-old-0002',
          'tenant-002/s-old-0001',
          'tenant-003/s-old-0001',
        ],
        activeSessions: ['tenant-001/s-new-0001', 'tenant-002/s-new-0001'],
      } satisfies SeededSessions,
    };

    it('counts one operation per tenant started at its first delete, and each session deleted', () => {
      const writes = [
        del(10, 'tenant-001', 's-old-0001'),
        del(11, 'tenant-001', 's-old-0002'),
        del(20, 'tenant-002', 's-old-0001'),
        del(25, 'tenant-002', 's-old-0001'),
        // Not this job's effects: another job's table, a put.
        del(30, 'tenant-003', 's-old-0001', 'someone-elses-table'),
        { ...del(31, 'tenant-003', 's-old-0001'), action: 'PutItem' as const },
      ];
      const reading = fixture.effects({ settings: settings(), seeded, writes });
      expect(reading.effectsByOperation).toEqual(
        new Map([
          ['tenant-001', 1],
          ['tenant-002', 1],
        ]),
      );
      expect(reading.effectsByItem).toEqual(
        new Map([
          [`${SESSIONS}/tenant-001/s-old-0001`, 1],
          [`${SESSIONS}/tenant-001/s-old-0002`, 1],
          [`${SESSIONS}/tenant-002/s-old-0001`, 2],
        ]),
      );
      expect(reading.starts).toEqual([10, 20]);
      expect(reading.throttled).toBeUndefined();
      expect(reading.unexpectedEffects).toEqual([]);
      // Every session seeded as expired is an item the run must touch, with the tenant it belongs to.
      const { expiredSessions } = seeded.state as SeededSessions;
      expect(reading.expectedItems?.size).toBe(expiredSessions.length);
      for (const s of expiredSessions) expect(reading.expectedItems?.get(`${SESSIONS}/${s}`)).toBe(s.split('/')[0]);
    });

    it('flags a delete of a session not seeded as expired, and of an item in a table the job only reads', () => {
      const writes: ObservedWrite[] = [
        del(10, 'tenant-001', 's-new-0001'),
        del(12, 'tenant-009', 's-old-0001'),
        // Key attributes in the other order name the same item.
        {
          at: 14,
          service: 'dynamodb',
          action: 'DeleteItem',
          resource: SESSIONS,
          key: { sessionId: 's-old-0001', tenantId: 'tenant-003' },
        },
        { at: 16, service: 'dynamodb', action: 'DeleteItem', resource: TENANTS, key: { tenantId: 'tenant-002' } },
      ];
      const reading = fixture.effects({ settings: settings(), seeded, writes });
      expect(reading.unexpectedEffects).toEqual([
        `${SESSIONS}/tenant-001/s-new-0001`,
        `${SESSIONS}/tenant-009/s-old-0001`,
        `${TENANTS}/tenant-002`,
      ]);
      expect(reading.effectsByItem?.get(`${SESSIONS}/tenant-003/s-old-0001`)).toBe(1);
      expect([...reading.effectsByOperation.keys()]).toEqual(['tenant-001', 'tenant-009', 'tenant-003', 'tenant-002']);
    });

    it("throws when the seed's record of sessions is missing", () => {
      expect(() =>
        fixture.effects({ settings: settings(), seeded: { expectedOperations: [], summary: '' }, writes: [] }),
      ).toThrow('job expired-session-cleanup: effects need the sessions its seed recorded (SeededDemo.state)');
    });
  });

  describe('Method: operationKeyOf', () => {
    it('is the tenant ID of a valid resource, and undefined otherwise', () => {
      expect(fixture.operationKeyOf({ tenantId: 'tenant-001' })).toBe('tenant-001');
      expect(fixture.operationKeyOf({ tenantId: 42 })).toBeUndefined();
    });
  });
});
