import {
  InvalidOperationIdError,
  assertOperationId,
  buildOperationId,
  idPartProblem,
  idPartSchema,
} from '../../../lambda/core/operationIds';
import { idSchema } from '../../../lambda/core/message';

describe('Function: buildOperationId', () => {
  const date = { businessDate: '2026-11-28' };

  it('joins its parts with ":" in order, fixed words as they are', () => {
    expect(buildOperationId(['reconcile', 'acme', { label: 'payment ID', id: 'pay-1' }, date])).toBe(
      'reconcile:acme:pay-1:2026-11-28',
    );
    expect(buildOperationId([{ label: 'tenant ID', id: 't-1' }, 'expired-sessions', date])).toBe(
      't-1:expired-sessions:2026-11-28',
    );
  });

  it('builds an ID the message contract accepts from any ID part the part schema accepts', () => {
    const id = buildOperationId(['reconcile', { label: 'payment ID', id: 'P_9.x@y#z/1+2=3' }, date]);
    expect(idSchema.safeParse(id).success).toBe(true);
  });

  it('throws naming the part when an ID holds the separator', () => {
    expect(() => buildOperationId(['reconcile', { label: 'payment ID', id: 'a:b' }, date])).toThrow(
      new InvalidOperationIdError(
        'payment ID "a:b" cannot be part of an operation ID: it must be 1 to 128 characters of letters, digits and _ . @ # / + = - starting with a letter or digit',
      ),
    );
  });

  it('throws on an over-long ID part, quoting only an excerpt', () => {
    expect(() => buildOperationId([{ label: 'payment ID', id: 'x'.repeat(129) }])).toThrow(
      `payment ID "${'x'.repeat(40)}..." cannot be part of an operation ID`,
    );
  });

  it('throws on an impossible business date', () => {
    expect(() => buildOperationId(['x', { businessDate: '2026-02-30' }])).toThrow(
      new InvalidOperationIdError('business date "2026-02-30" is not a real date in the form YYYY-MM-DD'),
    );
  });

  it('checks a fixed word only as part of the whole ID, against the message contract', () => {
    expect(() => buildOperationId(['re concile', { label: 'payment ID', id: 'p' }])).toThrow(
      new InvalidOperationIdError(
        'operation ID "re concile:p" may hold only letters, digits and : _ . @ # / + = - (no spaces or control characters)',
      ),
    );
    expect(() => buildOperationId([])).toThrow(new InvalidOperationIdError('operation ID "" must not be empty'));
  });

  it('throws when the whole ID is longer than the message contract allows', () => {
    const part = { label: 'ID', id: 'x'.repeat(128) };
    expect(() => buildOperationId([part, part, part])).toThrow(
      new InvalidOperationIdError(`operation ID "${'x'.repeat(40)}..." must be at most 256 characters`),
    );
  });
});

describe('Function: assertOperationId', () => {
  it('passes when the ID is the expected one', () => {
    expect(() => assertOperationId('a:b', () => 'a:b')).not.toThrow();
  });

  it('throws naming both IDs when they differ', () => {
    expect(() => assertOperationId('a:b', () => 'a:c')).toThrow(
      new InvalidOperationIdError('operation ID "a:b" does not match its resource (expected "a:c")'),
    );
  });
});

describe('Schema: idPartSchema', () => {
  it('accepts an ID every builder accepts', () => {
    expect(idPartSchema.safeParse('pay_1.a@b#c/d+e=f-g').success).toBe(true);
  });

  it.each([
    [
      'a separator',
      'a:b',
      'may hold only letters, digits and _ . @ # / + = - (no ":" or spaces), starting with a letter or digit',
    ],
    ['nothing', '', 'must not be empty'],
    ['too much', 'x'.repeat(129), 'must be at most 128 characters'],
  ])('rejects %s', (_label, value, message) => {
    const result = idPartSchema.safeParse(value);
    expect(result.success).toBe(false);
    expect(result.error?.issues[0].message).toBe(message);
  });
});

describe('Function: idPartProblem', () => {
  it('says why a value cannot be part of an operation ID, naming the field, and nothing for one that can', () => {
    expect(idPartProblem('upload ID', 'has space')).toBe(
      'upload ID "has space" cannot be part of an operation ID: it must be 1 to 128 characters of letters, digits and _ . @ # / + = - starting with a letter or digit',
    );
    expect(idPartProblem('tenant ID', 'a:b')).toMatch(/^tenant ID "a:b" cannot be part of an operation ID/);
    expect(idPartProblem('tenant ID', '')).toMatch(/^tenant ID "" cannot be part of an operation ID/);
    expect(idPartProblem('tenant ID', 'tenant-001')).toBeUndefined();
  });
});
