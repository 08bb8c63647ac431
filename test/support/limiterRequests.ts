// A DynamoDB client that counts the limiter's requests: conditional writes that landed, writes that lost a race, and
// reads. Tests give it to the limiters they measure, so every request counted is theirs.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';

export interface LimiterRequestCounts {
  written: number;
  lost: number;
  reads: number;
}

export function countingLimiterClient(): { client: DynamoDBClient; counts: LimiterRequestCounts } {
  const client = new DynamoDBClient({});
  const counts: LimiterRequestCounts = { written: 0, lost: 0, reads: 0 };
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const name = context.commandName;
      try {
        const out = await next(args);
        if (name === 'UpdateItemCommand') counts.written++;
        if (name === 'GetItemCommand') counts.reads++;
        return out;
      } catch (error) {
        if (name === 'UpdateItemCommand' && (error as Error).name === 'ConditionalCheckFailedException') counts.lost++;
        throw error;
      }
    },
    // Initialize: once per command, whatever the SDK's own retries do below it.
    { step: 'initialize', name: 'countLimiterRequests' },
  );
  return { client, counts };
}
