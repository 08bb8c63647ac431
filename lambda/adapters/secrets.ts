// The secrets edge: reads a secret's value through Powertools Parameters (cached), for apply-time use only.
import { getSecret } from '@aws-lambda-powertools/parameters/secrets';

/** How long a fetched secret stays cached in the container before it is read again. @default 300 */
export const DEFAULT_SECRET_MAX_AGE_SECONDS = 300;

/** Reads the current value of one secret; the value must never be logged or put into an error message. */
export type SecretGetter = () => Promise<string>;

export class SecretError extends Error {
  constructor(message: string, public readonly secretId: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SecretError';
  }
}

export interface SecretGetterOptions {
  /** @default DEFAULT_SECRET_MAX_AGE_SECONDS */
  maxAgeSeconds?: number;
}

/**
 * A getter for a string secret by name or ARN. Nothing is fetched until it is first called, so a container can start
 * (and discovery can run) without Secrets Manager access; Powertools caches the value for `maxAgeSeconds`, so a rotated
 * key is picked up without a redeploy.
 */
export function secretStringGetter(secretId: string, options: SecretGetterOptions = {}): SecretGetter {
  const maxAge = options.maxAgeSeconds ?? DEFAULT_SECRET_MAX_AGE_SECONDS;
  return async () => {
    let value: unknown;
    try {
      value = await getSecret(secretId, { maxAge });
    } catch (error) {
      throw new SecretError(`could not read secret "${secretId}"`, secretId, { cause: error });
    }
    if (typeof value !== 'string' || value.length === 0) {
      throw new SecretError(`secret "${secretId}" holds no string value`, secretId);
    }
    return value;
  };
}
