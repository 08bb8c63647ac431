import { formatMarkdown, formatText } from '../../chaos/report';
import type { ChaosResult } from '../../chaos/run';

const result: ChaosResult = {
  ok: false,
  ops: 10,
  seed: 3,
  settled: true,
  durationMs: 12_345,
  faultsInjected: { workerKillsArmed: 2, poisonMessages: 1 },
  invariants: {
    effectsEqualUniqueOperations: { ok: true, effects: 10, uniqueOperations: 10, repeatedOperations: [] },
    nothingLost: { ok: true, missing: 0, batches: [{ batchId: 'b' }] },
    rateRespected: { ok: false, maxStartsInAnyWindow: 11, limit: 10 },
    onlyTerminalFailuresInDlq: { ok: true, reasons: ['a|b'] },
  },
};

describe('Function: formatText', () => {
  it('prints the faults, one line per invariant with its figures, and the verdict', () => {
    expect(formatText(result).split('\n')).toEqual([
      'chaos run: 10 operations, seed 3, 12.3 s, settled',
      'faults injected: workerKillsArmed 2, poisonMessages 1',
      'PASS  effectsEqualUniqueOperations: effects 10; uniqueOperations 10',
      'PASS  nothingLost: missing 0',
      'FAIL  rateRespected: maxStartsInAnyWindow 11; limit 10',
      'PASS  onlyTerminalFailuresInDlq: reasons a|b',
      'FAILED',
    ]);
  });
});

describe('Function: formatMarkdown', () => {
  it('writes tables of the faults and of the invariants, escaping pipes', () => {
    const md = formatMarkdown(result);
    expect(md).toContain('# Chaos run: FAILED');
    expect(md).toContain('| workerKillsArmed | 2 |');
    expect(md).toContain('| rateRespected | NO | maxStartsInAnyWindow 11; limit 10 |');
    expect(md).toContain('| onlyTerminalFailuresInDlq | yes | reasons a\\|b |');
  });
});
