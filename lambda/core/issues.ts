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
export function describeIssues(
  error: { readonly issues: readonly z.core.$ZodIssue[] },
  format: IssueFormat = {},
): string[] {
  const root = format.root ?? '(root)';
  return error.issues.map((issue) => {
    const message = issue.code === 'invalid_key' && issue.issues.length > 0 ? issue.issues[0].message : issue.message;
    const path = issuePath(issue.path);
    const where = path === '' ? root : format.rootInPaths ? `${root}.${path}` : path;
    return `${where}: ${message}`;
  });
}

/**
 * Edit distance between two strings (insert, delete, substitute, or swap two neighbours: one edit each), or
 * `limit + 1` as soon as it is known to exceed `limit`.
 */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        current[j] = Math.min(current[j], before[j - 2] + 1);
    }
    if (Math.min(...current) > limit) return limit + 1;
    [before, previous] = [previous, current];
  }
  return previous[b.length];
}

/**
 * The known key `key` is most likely a misspelling of, if any: the same key but for case, or, for a known key of 8
 * characters or more, one edit away from it ignoring case. A short key is matched on case alone, since one edit of a
 * short word is often another word meant on purpose (`paging`, `spacing`).
 */
export function misspeltKey<K extends string>(key: string, known: readonly K[]): K | undefined {
  if ((known as readonly string[]).includes(key)) return undefined;
  const lower = key.toLowerCase();
  let best: { key: K; distance: number } | undefined;
  for (const candidate of known) {
    const limit = candidate.length >= 8 ? 1 : 0;
    const distance = editDistance(lower, candidate.toLowerCase(), limit);
    if (distance <= limit && (best === undefined || distance < best.distance)) best = { key: candidate, distance };
  }
  return best?.key;
}

/**
 * What a strict object says of keys it does not know: each named, with the known key it misspells, or where a key
 * that moved now lives (`moved`: old key to its new place), so a typo or an old config fails naming its fix.
 */
export function unknownKeysMessage(
  keys: readonly string[],
  known: readonly string[],
  moved: Readonly<Record<string, string>> = {},
): string {
  return keys
    .map((key) => {
      if (Object.hasOwn(moved, key)) return `"${key}" has moved: ${moved[key]}`;
      const meant = misspeltKey(key, known);
      return meant === undefined ? `unknown key "${key}"` : `unknown key "${key}"; did you mean ${meant}?`;
    })
    .join('; ');
}
