import { operationsOf } from '../../../lambda/core/job';

describe('Function: operationsOf', () => {
  const rows = [{ id: 'a' }, { id: 'b b' }, { id: 'c' }, { id: 'd:d' }];
  const toOperation = (row: { id: string }) =>
    /^[a-z]+$/.test(row.id)
      ? { operationId: `op:${row.id}`, resource: { id: row.id } }
      : `id "${row.id}" is not a plain word`;

  it('turns the rows it can into operations, in order, and hands back the others with their key and reason', () => {
    expect(operationsOf(rows, (row) => row.id, toOperation)).toEqual({
      operations: [
        { operationId: 'op:a', resource: { id: 'a' } },
        { operationId: 'op:c', resource: { id: 'c' } },
      ],
      invalid: [
        { key: 'b b', reason: 'id "b b" is not a plain word' },
        { key: 'd:d', reason: 'id "d:d" is not a plain word' },
      ],
    });
  });

  it('fails the page on an error the conversion throws: a fault, not a bad row', () => {
    expect(() =>
      operationsOf(
        rows,
        (row) => row.id,
        () => {
          throw new TypeError('cannot read properties of undefined');
        },
      ),
    ).toThrow(new TypeError('cannot read properties of undefined'));
  });
});
