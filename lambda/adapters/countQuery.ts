// Counting what a discovery query would return, for the producer's `countEligible`: the operator's "discovered but not
// yet admitted" and projected finish. Select COUNT reads the index but returns no items.
import { QueryCommand, type DynamoDBDocumentClient, type QueryCommandInput } from '@aws-sdk/lib-dynamodb';

/** Query pages counted at most (each reads up to 1 MB of the index): a bound on what one count may cost. @default 100 */
export const MAX_COUNT_PAGES = 100;

/**
 * The number of items the query matches, following LastEvaluatedKey.
 * @returns the count, and whether it stopped at `maxPages` (then it is a lower bound)
 */
export async function countQuery(
  documents: Pick<DynamoDBDocumentClient, 'send'>,
  input: Omit<QueryCommandInput, 'Select' | 'ExclusiveStartKey' | 'ProjectionExpression' | 'Limit'>,
  maxPages = MAX_COUNT_PAGES,
): Promise<{ count: number; truncated: boolean }> {
  let count = 0;
  let start: Record<string, unknown> | undefined;
  for (let page = 0; page < maxPages; page++) {
    const out = await documents.send(new QueryCommand({ ...input, Select: 'COUNT', ExclusiveStartKey: start }));
    count += out.Count ?? 0;
    start = out.LastEvaluatedKey;
    if (!start) return { count, truncated: false };
  }
  return { count, truncated: true };
}
