// Stateful half of the pipeline's own bookkeeping: the idempotency, run-ledger and rate-limiter tables every job shares.
import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';

export interface StateTablesProps {
  /** Keep the tables when the stack is deleted (RETAIN) instead of deleting them (DESTROY). */
  readonly retainData: boolean;
}

/** Names of the key and TTL attributes; the handlers' adapters use the same names. */
export const StateTableKeys = {
  /** Powertools' DynamoDBPersistenceLayer defaults: key `id`, expiry `expiration`. */
  idempotency: { partitionKey: 'id', ttl: 'expiration' },
  ledger: { partitionKey: 'pk', sortKey: 'sk', ttl: 'expiresAt' },
  limiter: { partitionKey: 'pk', ttl: 'expiresAt' },
} as const;

/**
 * The three tables the runtime owns. All are on-demand (load follows the schedules, idle most of the day), encrypted
 * with the AWS-managed key, and have point-in-time recovery: it costs little at this size and a mistaken bulk write
 * to the idempotency table would otherwise re-open every operation. Deletion follows `retainData`.
 */
export class StateTables extends Construct {
  /** Powertools idempotency records, keyed on the operation ID. */
  public readonly idempotencyTable: dynamodb.Table;
  /** One item per run and per page: what each scheduled run discovered, published and finished. */
  public readonly ledgerTable: dynamodb.Table;
  /** Token-bucket state of each job's rate limiter. */
  public readonly limiterTable: dynamodb.Table;

  constructor(scope: Construct, id: string, props: StateTablesProps) {
    super(scope, id);
    const common = {
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy: props.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    };
    const S = dynamodb.AttributeType.STRING;
    this.idempotencyTable = new dynamodb.Table(this, 'Idempotency', {
      ...common,
      partitionKey: { name: StateTableKeys.idempotency.partitionKey, type: S },
      timeToLiveAttribute: StateTableKeys.idempotency.ttl,
    });
    this.ledgerTable = new dynamodb.Table(this, 'Ledger', {
      ...common,
      partitionKey: { name: StateTableKeys.ledger.partitionKey, type: S },
      sortKey: { name: StateTableKeys.ledger.sortKey, type: S },
      timeToLiveAttribute: StateTableKeys.ledger.ttl,
    });
    this.limiterTable = new dynamodb.Table(this, 'Limiter', {
      ...common,
      partitionKey: { name: StateTableKeys.limiter.partitionKey, type: S },
      timeToLiveAttribute: StateTableKeys.limiter.ttl,
    });
  }
}
