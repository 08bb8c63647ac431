import { PublishError } from '../../../../lambda/adapters/sqsPublisher';
import { PagePublisher, pageOrphans, type OutgoingPage } from '../../../../lambda/handlers/producer/pagePublisher';
import { BATCH, FakePublisher, FakeRunState, JOB, NOW, NOW_MS, QUEUE_URL, runState, step } from './fakes';

describe('Function: pageOrphans', () => {
  it('counts a page that no earlier attempt saw as it is, and leaves the orphans alone', () => {
    expect(pageOrphans(['a', 'b'], [], [])).toEqual({ discovered: 2, orphans: undefined });
    expect(pageOrphans(['a', 'b'], [['a', 'b']], ['z'])).toEqual({ discovered: 2, orphans: undefined });
  });

  it('makes what a killed attempt found and this one did not an orphan, counted once', () => {
    expect(pageOrphans(['a'], [['a', 'b', 'c'], ['b']], [])).toEqual({ discovered: 3, orphans: ['b', 'c'] });
  });

  it('does not count an orphan found again, and removes it from the orphans', () => {
    expect(pageOrphans(['a', 'z'], [], ['y', 'z'])).toEqual({ discovered: 1, orphans: ['y'] });
  });
});

const OWNER = 'request-1/lease';

function page(overrides: Partial<OutgoingPage> = {}): OutgoingPage {
  return {
    page: 1,
    messages: ['a', 'b'].map((id) => ({ operationId: `fake:${id}:2026-11-28`, body: `{"id":"${id}"}` })),
    invalid: [],
    startedMs: NOW_MS - 500,
    cursor: '2',
    plannedUntilMs: NOW_MS + 1_000,
    ...overrides,
  };
}

describe('Class: PagePublisher', () => {
  let store: FakeRunState;
  let publisher: FakePublisher;
  let pages: PagePublisher;

  beforeEach(() => {
    store = new FakeRunState({ [BATCH]: runState({ leaseOwner: OWNER, leaseUntilMs: NOW_MS + 60_000 }) });
    publisher = new FakePublisher();
    pages = new PagePublisher({ jobName: JOB, queueUrl: QUEUE_URL, runState: store, publisher, now: () => NOW });
  });

  describe('Method: publish', () => {
    it('keeps the attempt, then its invalid rows, then publishes, then commits the cursor and counts', async () => {
      const invalid = [{ key: 'row-1', reasons: ['id: must not be empty'] }];
      const result = await pages.publish(step(), OWNER, [], page({ invalid }));
      expect(result).toEqual({ committed: true, published: 2, orphans: undefined });

      expect(store.methods()).toEqual(['pageAttempts', 'recordPage', 'recordInvalidRows', 'commitPage']);
      expect(store.calls[1].args).toEqual([BATCH, 1, OWNER, ['fake:a:2026-11-28', 'fake:b:2026-11-28'], NOW_MS - 500]);
      expect(publisher.calls).toEqual([{ queueUrl: QUEUE_URL, messages: page().messages }]);
      expect(store.calls[3].args[3]).toEqual({
        cursor: '2',
        discovered: 2,
        published: 2,
        orphans: undefined,
        invalidRows: 1,
        plannedUntilMs: NOW_MS + 1_000,
        finishedAt: undefined,
      });
    });

    it('marks the run finished with the last page', async () => {
      await pages.publish(step(), OWNER, [], page({ cursor: undefined }));
      expect(store.calls.at(-1)?.args[3]).toMatchObject({ cursor: undefined, finishedAt: NOW.toISOString() });
    });

    it('commits the orphans a killed attempt of the page left', async () => {
      await store.recordPage(JOB, BATCH, 1, 'killed', ['fake:a:2026-11-28', 'fake:gone:2026-11-28']);
      const result = await pages.publish(step(), OWNER, [], page());
      expect(result).toEqual({ committed: true, published: 2, orphans: ['fake:gone:2026-11-28'] });
      expect(store.calls.at(-1)?.args[3]).toMatchObject({ discovered: 3, orphans: ['fake:gone:2026-11-28'] });
    });

    it('counts nothing when publishing fails: the page was kept, never committed', async () => {
      publisher.failWith = () => new PublishError('failed to publish 1 of 2 messages', QUEUE_URL, {}, 1);
      await expect(pages.publish(step(), OWNER, [], page())).rejects.toThrow('failed to publish 1 of 2 messages');
      expect(store.methods()).toEqual(['pageAttempts', 'recordPage']);
      expect(store.runs.get(BATCH)).toMatchObject({ pages: 0, discovered: 0 });
    });

    it('reports a commit refused for a lost lease, after publishing', async () => {
      expect(await pages.publish(step(), 'someone-else', [], page())).toEqual({ committed: false });
      expect(publisher.calls).toHaveLength(1);
    });
  });
});
