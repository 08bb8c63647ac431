// Test helper: what the project's Powertools logger prints for an error (its message, stack, every field and its
// whole cause chain, as Powertools formats them), captured from stdout and stderr (where ERROR lines go), for asserting
// that a secret is not in it.
import { logger } from '../../lambda/adapters/observability';

export function loggedError(error: unknown): string {
  const lines: string[] = [];
  const level = logger.getLevelName();
  const capture = (chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  };
  const out = jest.spyOn(process.stdout, 'write').mockImplementation(capture);
  const err = jest.spyOn(process.stderr, 'write').mockImplementation(capture);
  logger.setLogLevel('DEBUG');
  try {
    logger.error('apply failed; will retry', { error: error as Error });
  } finally {
    logger.setLogLevel(level);
    out.mockRestore();
    err.mockRestore();
  }
  return lines.join('');
}
