// The counting proxy: forwards AWS requests to dynalite unchanged but for ReturnConsumedCapacity, and counts them.
import { CreateTableCommand, DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { actionOf, startCountingProxy } from '../../bench/countingProxy';
import { LOCAL_CREDENTIALS, startDynamoDb } from '../../local/servers';

describe('Function: actionOf', () => {
  it('reads the JSON protocol target and the query protocol action', () => {
    expect(actionOf({ 'x-amz-target': 'DynamoDB_20120810.PutItem' }, '/', '{}')).toBe('PutItem');
    expect(actionOf({}, '/', 'Action=SendMessageBatch&Version=2012-11-05')).toBe('SendMessageBatch');
    expect(actionOf({}, '/', '')).toBe('Unknown');
  });
});

describe('Function: startCountingProxy', () => {
  it('counts each DynamoDB request with its table and consumed units, a refused conditional write included', async () => {
    const dynamo = await startDynamoDb();
    const proxy = await startCountingProxy('dynamodb', dynamo.endpoint);
    const client = new DynamoDBClient({
      endpoint: proxy.endpoint,
      region: 'us-east-1',
      credentials: LOCAL_CREDENTIALS,
    });
    try {
      await client.send(
        new CreateTableCommand({
          TableName: 'bench-t',
          KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
          AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
          BillingMode: 'PAY_PER_REQUEST',
        }),
      );
      const put = new PutItemCommand({
        TableName: 'bench-t',
        Item: { id: { S: 'a' } },
        ConditionExpression: 'attribute_not_exists(id)',
      });
      await client.send(put);
      await expect(client.send(put)).rejects.toThrow('The conditional request failed');
      expect(proxy.requests.filter((r) => r.action === 'PutItem')).toEqual([
        { service: 'dynamodb', action: 'PutItem', status: 200, table: 'bench-t', capacityUnits: 1 },
        { service: 'dynamodb', action: 'PutItem', status: 400, table: 'bench-t', capacityUnits: undefined },
      ]);
    } finally {
      client.destroy();
      await proxy.close();
      await dynamo.close();
    }
  });
});
