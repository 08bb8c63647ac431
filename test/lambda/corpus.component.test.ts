// The engine's bad-input corpus (test/corpus/messages.json) fed through the real consumer of the fake job, mixed with
// valid messages: what the message contract refuses, whatever the job. Each example job feeds its own resource
// schema's cases to its consumer in its own folder (lambda/jobs/<job>/test/corpus.component.test.ts).
import { fakeJobCalls, job as fakeJob } from '../fixtures/jobs/fake-job';
import { messageCases } from '../corpus/loadCorpus';
import { CORPUS_DATE, corpusEnvelope, describeMessageCorpus } from '../support/messageCorpus';

const allCases = messageCases();

describe('Function: createConsumer', () => {
  it('has cases for the fake job alone, and for every category the corpus promises', () => {
    expect(new Set(allCases.map((c) => c.job))).toEqual(new Set([fakeJob.name]));
    expect(new Set(allCases.map((c) => c.name)).size).toBe(allCases.length);
    for (const needle of [
      'not valid JSON',
      'Unrecognized key',
      'unsupported message version',
      'jobType: expected',
      'at most 256 characters',
      'byte cap',
      'real calendar date',
      'form YYYY-MM-DD',
    ]) {
      expect(allCases.some((c) => c.expect.includes(needle))).toBe(true);
    }
  });

  describeMessageCorpus(fakeJob.name, allCases, async () => {
    fakeJobCalls.reset();
    return {
      job: fakeJob,
      deps: { items: 0 },
      seedValid: async (n) => corpusEnvelope(fakeJob.name, `fake:ok-${n}:${CORPUS_DATE}`, { id: `ok-${n}` }),
      applied: async (n) => fakeJobCalls.apply.some((request) => request.resource.id === `ok-${n}`),
    };
  });
});
