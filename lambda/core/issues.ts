// How a zod error reads wherever the engine reports one (a config error at synthesis, a message's failure reason, a
// settings error at a function's start, an operator command's complaint): one line per issue, `<path>: <problem>`.
// Written once here; each caller names only what the parsed value is called (`body`, `event`, `resource`, `(root)`).
import type * as z from 'zod/mini';

/** How describeIssues names the parsed value: under `root`, and optionally at the start of every path. */
export interface IssueFormat {
  /** What the parsed value is called: an issue about the whole value is reported under this name. @default '(root)' */
  readonly root?: string;
  /** Start every path with `root` (`resource.objectKey`), not only an issue about the whole value. @default false */
  readonly rootInPaths?: boolean;
}

/** An issue's path as dotted keys (array indexes included): `jobs.session-expiry.rateLimit.starts`. */
export function issuePath(path: readonly PropertyKey[]): string {
  return path.map(String).join('.');
}

/**
 * One line per issue, `<path>: <problem>`, in zod's order. A bad record key is reported with the key's own problem
 * (zod nests it one level down under a generic "Invalid key in record").
 */
export function describeIssues(error: { readonly issues: readonly z.core.$ZodIssue[] }, format: IssueFormat = {}): string[] {
  const root = format.root ?? '(root)';
  return error.issues.map((issue) => {
    const message = issue.code === 'invalid_key' && issue.issues.length > 0 ? issue.issues[0].message : issue.message;
    const path = issuePath(issue.path);
    const where = path === '' ? root : format.rootInPaths ? `${root}.${path}` : path;
    return `${where}: ${message}`;
  });
}
