// Test helpers: everything the process writes (the project's Powertools log lines at every level, EMF metrics) while a
// test runs, captured from stdout and stderr (where ERROR lines go), for asserting that a secret or a name is not in it.
import { logger } from '../../lambda/adapters/observability';

export interface CapturedOutput {
  /** Each write, in order. */
  readonly chunks: string[];
  /** Stops capturing and puts the log level back. */
  stop(): void;
}

/** Captures stdout and stderr, with the logger at DEBUG so that a leak at any level is caught, until `stop`. */
export function captureOutput(): CapturedOutput {
  const chunks: string[] = [];
  const level = logger.getLevelName();
  const capture = (chunk: string | Uint8Array) => {
    chunks.push(String(chunk));
    return true;
  };
  const out = jest.spyOn(process.stdout, 'write').mockImplementation(capture);
  const err = jest.spyOn(process.stderr, 'write').mockImplementation(capture);
  logger.setLogLevel('DEBUG');
  return {
    chunks,
    stop() {
      logger.setLogLevel(level);
      out.mockRestore();
      err.mockRestore();
    },
  };
}

/** What the logger prints for an error: its message, stack, every field and its whole cause chain, as Powertools formats them. */
export function loggedError(error: unknown): string {
  const output = captureOutput();
  try {
    logger.error('apply failed; will retry', { error: error as Error });
  } finally {
    output.stop();
  }
  return output.chunks.join('');
}
