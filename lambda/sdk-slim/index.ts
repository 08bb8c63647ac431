// The AWS SDK names the handlers use on their hot path (DynamoDB and SQS), re-exported from one module that the stack
// builds, tree-shaken and minified, into a Lambda layer as `sdk-slim` (lib/sdk-layer.ts). The handler bundles alias the
// four packages below to it.
//
// Why: loading these clients from the runtime's SDK means compiling about 1.2 MB of JavaScript over 37 files at every
// cold start (~90 ms of a ~140 ms module init); one tree-shaken file of ~240 KB compiles in about a third of that. It is
// a layer, not part of each bundle, so each handler package stays under 250 KB.
//
// Every value a bundle imports from these packages (our code's and Powertools') must be exported here, or it would be
// undefined at run time: test/lambda/sdk-slim.test.ts checks that against the sources.
export {
  BatchGetItemCommand,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
  paginateQuery,
} from '@aws-sdk/client-dynamodb';
export {
  BatchGetCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  ScanCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
export { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
export { GetQueueAttributesCommand, SQSClient, SendMessageBatchCommand } from '@aws-sdk/client-sqs';
