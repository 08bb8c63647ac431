// Test helper: reads the bad-input corpora kept as data in test/corpus/ and expands generated bodies.
import { readFileSync } from 'node:fs';
import * as path from 'node:path';

/** A long body described instead of stored: `repeat` written `times` times. */
export interface RepeatSpec {
  repeat: string;
  times: number;
  /** Replace `{i}` in each copy with its index (0, 1, ...), e.g. for thousands of distinct keys. @default false */
  numbered?: boolean;
}

/** Exactly the text that arrives, a generator, or text and generators concatenated. */
export type BodySpec = string | RepeatSpec | (string | RepeatSpec)[];

export interface MessageCase {
  name: string;
  /** The job whose consumer receives the body. */
  job: string;
  body: BodySpec;
  /** A substring the rejection reasons must contain, naming the problem. */
  expect: string;
}

export interface ConfigChange {
  path: (string | number)[];
  value?: unknown;
  remove?: boolean;
}

export interface ConfigCase {
  name: string;
  /** The environment in test/fixtures/environments.ts (the reference app's, with jobs of its own) the case starts from. */
  base: string;
  /** Each change: a path into that environment's input and the value put there, or `remove` to delete the key. */
  changes: ConfigChange[];
  /** The one problem line parseEnvironment must report, exactly. */
  expect: string;
}

const read = <T>(file: string): T => JSON.parse(readFileSync(path.join(__dirname, file), 'utf8')) as T;

export const messageCases = (): MessageCase[] => read<{ cases: MessageCase[] }>('messages.json').cases;
/** A job's own bad-message cases, in a file of messages.json's format (lambda/jobs/<job>/test/messages.json). */
export const messageCasesIn = (file: string): MessageCase[] =>
  (JSON.parse(readFileSync(file, 'utf8')) as { cases: MessageCase[] }).cases;
export const configCases = (): ConfigCase[] => read<{ cases: ConfigCase[] }>('config.json').cases;
/** Config that passes the schema but that the stack's constructs refuse; `expect` is the whole InvalidPropsError message. */
export const stackConfigCases = (): ConfigCase[] => read<{ stackCases: ConfigCase[] }>('config.json').stackCases;

function expandOne(part: string | RepeatSpec): string {
  if (typeof part === 'string') return part;
  if (!part.numbered) return part.repeat.repeat(part.times);
  return Array.from({ length: part.times }, (_, i) => part.repeat.split('{i}').join(String(i))).join('');
}

export function expandBody(spec: BodySpec): string {
  return Array.isArray(spec) ? spec.map(expandOne).join('') : expandOne(spec);
}

/** A deep copy of `input` with the case's changes applied; the original is never touched. */
export function applyChanges(input: unknown, changes: ConfigChange[]): unknown {
  const copy = structuredClone(input) as Record<string | number, unknown>;
  for (const { path, value, remove } of changes) {
    let node = copy;
    // A key the base leaves to its default (e.g. `alarms`) is created, so the case can set one value inside it.
    for (const key of path.slice(0, -1)) node = (node[key] ??= {}) as Record<string | number, unknown>;
    const last = path[path.length - 1];
    if (remove) delete node[last];
    else node[last] = value;
  }
  return copy;
}
