import {
  InvalidOperationIdError,
  assertOperationId,
  expiredSessionsOperationId,
  idPartProblem,
  idPartSchema,
  reconcileOperationId,
  staleUploadOperationId,
} from '../../../lambda/core/operationIds';
import { idSchema } from '../../../lambda/core/message';

describe('Function: reconcileOperationId', () => {
  it('builds reconcile:<provider>:<paymentId>:<businessDate>', () => {
    expect(reconcileOperationId({ provider: 'acme', paymentId: 'pay-1', businessDate: '2026-11-28' })).toBe('reconcile:acme:pay-1:2026-11-28');
  });

  it('builds an ID the message contract accepts', () => {
    const id = reconcileOperationId({ provider: 'acme', paymentId: 'P_9.x@y#z/1+2=3', businessDate: '2026-11-28' });
    expect(idSchema.safeParse(id).success).toBe(true);
  });

  it('throws when the payment ID holds the separator', () => {
    expect(() => reconcileOperationId({ provider: 'acme', paymentId: 'a:b', businessDate: '2026-11-28' })).toThrow(
      new InvalidOperationIdError('payment ID "a:b" cannot be part of an operation ID: it must be 1 to 128 characters of letters, digits and _ . @ # / + = - starting with a letter or digit'),
    );
  });

  it('throws on an over-long payment ID, quoting only an excerpt', () => {
    expect(() => reconcileOperationId({ provider: 'acme', paymentId: 'x'.repeat(129), businessDate: '2026-11-28' })).toThrow(
      `payment ID "${'x'.repeat(40)}..." cannot be part of an operation ID`,
    );
  });

  it('throws on a bad provider', () => {
    expect(() => reconcileOperationId({ provider: 'Acme Pay', paymentId: 'p', businessDate: '2026-11-28' })).toThrow(
      'provider "Acme Pay" must be 1 to 32 lower-case letters, digits or - starting with a letter',
    );
  });

  it('throws on an impossible business date', () => {
    expect(() => reconcileOperationId({ provider: 'acme', paymentId: 'p', businessDate: '2026-02-30' })).toThrow(
      'business date "2026-02-30" is not a real date in the form YYYY-MM-DD',
    );
  });
});

describe('Function: staleUploadOperationId', () => {
  it('builds stale-upload:<uploadId>:<deleteAfter>', () => {
    expect(staleUploadOperationId({ uploadId: 'u-1', deleteAfter: '2026-11-28T10:00:00.000Z' })).toBe('stale-upload:u-1:2026-11-28T10:00:00.000Z');
  });

  it('throws on a deadline that is not in canonical UTC form', () => {
    expect(() => staleUploadOperationId({ uploadId: 'u-1', deleteAfter: '2026-11-28T10:00:00Z' })).toThrow(
      'deleteAfter "2026-11-28T10:00:00Z" must be a UTC timestamp in the form YYYY-MM-DDTHH:mm:ss.sssZ',
    );
  });

  it('throws on an empty upload ID', () => {
    expect(() => staleUploadOperationId({ uploadId: '', deleteAfter: '2026-11-28T10:00:00.000Z' })).toThrow('upload ID "" cannot be part of an operation ID');
  });
});

describe('Function: expiredSessionsOperationId', () => {
  it('builds <tenantId>:expired-sessions:<businessDate>', () => {
    expect(expiredSessionsOperationId({ tenantId: 't-1', businessDate: '2026-11-28' })).toBe('t-1:expired-sessions:2026-11-28');
  });

  it('throws on a tenant ID with a space', () => {
    expect(() => expiredSessionsOperationId({ tenantId: 't 1', businessDate: '2026-11-28' })).toThrow('tenant ID "t 1" cannot be part of an operation ID');
  });
});

describe('Function: assertOperationId', () => {
  it('passes when the ID is the expected one', () => {
    expect(() => assertOperationId('a:b', () => 'a:b')).not.toThrow();
  });

  it('throws naming both IDs when they differ', () => {
    expect(() => assertOperationId('a:b', () => 'a:c')).toThrow(new InvalidOperationIdError('operation ID "a:b" does not match its resource (expected "a:c")'));
  });
});

describe('Schema: idPartSchema', () => {
  it('accepts an ID every builder accepts', () => {
    expect(idPartSchema.safeParse('pay_1.a@b#c/d+e=f-g').success).toBe(true);
  });

  it.each([
    ['a separator', 'a:b', 'may hold only letters, digits and _ . @ # / + = - (no ":" or spaces), starting with a letter or digit'],
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
