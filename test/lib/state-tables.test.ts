// StateTables: the runtime's own idempotency, ledger and limiter tables and their deletion policy.
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { StateTableKeys, StateTables } from '../../lib/state-tables';
import { testApp } from './cdkContext';
import { resourceOf } from './templateHelpers';

function build(retainData: boolean) {
  const stack = new Stack(testApp(), 'S');
  const tables = new StateTables(stack, 'State', { retainData });
  return { tables, template: Template.fromStack(stack) };
}

describe('Class: StateTables', () => {
  describe('Method: constructor', () => {
    it('uses the key names Powertools and the adapters expect', () => {
      expect(StateTableKeys).toEqual({
        idempotency: { partitionKey: 'id', ttl: 'expiration' },
        ledger: { partitionKey: 'pk', sortKey: 'sk', ttl: 'expiresAt' },
        limiter: { partitionKey: 'pk', ttl: 'expiresAt' },
      });
    });

    it('deletes all three tables with the stack when data is not retained, and keeps PITR and encryption', () => {
      const { tables, template } = build(false);
      for (const table of [tables.idempotencyTable, tables.ledgerTable, tables.limiterTable]) {
        expect(resourceOf(template, table)).toMatchObject({
          Properties: {
            BillingMode: 'PAY_PER_REQUEST',
            SSESpecification: { SSEEnabled: true },
            PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          },
          DeletionPolicy: 'Delete',
          UpdateReplacePolicy: 'Delete',
        });
      }
    });

    it('retains all three tables when data is retained', () => {
      const { tables, template } = build(true);
      for (const table of [tables.idempotencyTable, tables.ledgerTable, tables.limiterTable]) {
        expect(resourceOf(template, table)).toMatchObject({ DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' });
      }
      expect(resourceOf(template, tables.ledgerTable).Properties.KeySchema).toEqual([
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ]);
    });
  });
});
