// A failed record's error as its log line states it, for the people reading a run (the local report aggregates these
// lines per job, local/report.ts RecordFailureLog): the error's type and message, where the job's own code threw it,
// and which receive of the message failed. The batch processor catches what apply throws, so without this line a
// TypeError in a team's job is only in the function's logs.
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The key the failed-record log line carries its RecordFailure under (local/report.ts reads it). */
export const RECORD_FAILURE_KEY = 'recordFailure';

/** Longest error message kept in a RecordFailure; the full error (stack, cause) is on the same line under `error`. */
export const MAX_FAILURE_MESSAGE_CHARS = 500;

/**
 * Frames a stack keeps in the consumer: V8 keeps 10 by default, and an error thrown inside a package (the SDK's
 * middleware alone is a dozen frames deep) uses them up before the job's own call, leaving no frame to name.
 */
export const STACK_TRACE_FRAMES = 50;

/**
 * Makes every error created from now on keep STACK_TRACE_FRAMES frames (more if the process already keeps more). The
 * consumer calls it when it is created; the cost is paid only when an error is created.
 */
export function keepJobFrames(): void {
  if (Error.stackTraceLimit < STACK_TRACE_FRAMES) Error.stackTraceLimit = STACK_TRACE_FRAMES;
}

/** What a failed record's log line says of its failure. */
export interface RecordFailure {
  /** The error's type (`TypeError`, `RetryableError`), or the type of what was thrown when it is not an error. */
  errorName: string;
  /** The message's first line (a module-not-found error lists its require stack on the next ones), bounded. */
  errorMessage: string;
  /**
   * Where the job's own code threw it: `<path>:<line>:<column>`, the path relative to the app's folder (the one holding
   * the engine, or the node_modules it is installed in), from the first stack frame that is neither the engine's, a
   * package's nor Node's. Source-mapped in a bundle (the functions run with --enable-source-maps). Absent when no frame
   * is the job's: the engine failed, or the stack cannot be mapped to files.
   */
  jobLocation?: string;
  /** Which receive of the message failed (SQS ApproximateReceiveCount): each failed receive is one line. */
  attempt: number;
}

/** Where the engine's own files are, and the folder a job's files are named relative to. */
export interface CodeLayout {
  /** The engine's `lambda/` folder (not its jobs/ subfolder: this repository keeps its examples there). */
  engineDir: string;
  /** The app's folder: paths in `jobLocation` are relative to it. */
  appDir: string;
}

interface Frame {
  file: string;
  line: number;
  column: number;
}

// `at fn (file:line:col)`, `at file:line:col`, `at async fn (file:line:col)`: the position is the line's last group.
const FRAME = /^\s*at (?:.*?\()?(.+?):(\d+):(\d+)\)?$/;

/** The file, line and column of each `at` line of a V8 stack, in order (a frame with no position is left out). */
export function stackFrames(stack: string): Frame[] {
  const frames: Frame[] = [];
  for (const text of stack.split('\n')) {
    const match = FRAME.exec(text);
    if (!match) continue;
    const file = match[1].startsWith('file://') ? fileURLToPath(match[1]) : match[1];
    frames.push({ file, line: Number(match[2]), column: Number(match[3]) });
  }
  return frames;
}

/**
 * The layout of the code this module is part of, from where its own file is (`<engine>/handlers/consumer/recordFailure`
 * as the stack names it), or undefined when that is not this file's own name: a bundle run without source maps, whose
 * frames all name the bundle, so no frame could be told to be the job's.
 */
export function layoutOf(ownFile: string | undefined): CodeLayout | undefined {
  const own = /[\\/]handlers[\\/]consumer[\\/]recordFailure\.[cm]?[jt]s$/;
  if (ownFile === undefined || !own.test(ownFile)) return undefined;
  const engineDir = resolve(dirname(ownFile), '..', '..');
  const modules = engineDir.indexOf(`${sep}node_modules${sep}`);
  // On Lambda the source maps name the app's folder as the root (/var/task/../..): its node_modules is /node_modules.
  return { engineDir, appDir: modules >= 0 ? engineDir.slice(0, modules) || sep : dirname(engineDir) };
}

function ownFile(): string | undefined {
  return stackFrames(new Error().stack ?? '')[0]?.file;
}

let layout: CodeLayout | undefined | null = null;
/** This module's layout, read from its own stack once, on the first failure. */
function ownLayout(): CodeLayout | undefined {
  if (layout === null) layout = layoutOf(ownFile());
  return layout;
}

/** Where in the job's own code the stack was thrown (see RecordFailure.jobLocation), or undefined. */
export function jobCodeLocation(stack: string | undefined, code: CodeLayout | undefined): string | undefined {
  if (stack === undefined || code === undefined) return undefined;
  const engine = `${code.engineDir}${sep}`;
  const examples = `${join(code.engineDir, 'jobs')}${sep}`;
  for (const frame of stackFrames(stack)) {
    // node:internal/..., native code: not a file of the job.
    if (!isAbsolute(frame.file)) continue;
    if (frame.file.includes(`${sep}node_modules${sep}`)) continue;
    if (frame.file.startsWith(engine) && !frame.file.startsWith(examples)) continue;
    return `${relative(code.appDir, frame.file).split(sep).join('/')}:${frame.line}:${frame.column}`;
  }
  return undefined;
}

/** The RecordFailure of `error`, thrown on the message's `attempt`-th receive. */
export function recordFailure(
  error: unknown,
  attempt: number,
  code: CodeLayout | undefined = ownLayout(),
): RecordFailure {
  type Fields = { name?: unknown; message?: unknown; stack?: unknown };
  const fields: Fields = typeof error === 'object' && error !== null ? error : {};
  // Duck-typed, not instanceof: an error from another realm (a VM, a bundled copy of a library) is still an error.
  const isErrorLike = typeof fields.message === 'string';
  const named = typeof fields.name === 'string' && fields.name !== '' ? fields.name : 'Error';
  const errorName = isErrorLike ? named : error === null ? 'null' : typeof error;
  const firstLine = (isErrorLike ? (fields.message as string) : String(error)).split('\n', 1)[0];
  const errorMessage =
    firstLine.length > MAX_FAILURE_MESSAGE_CHARS ? `${firstLine.slice(0, MAX_FAILURE_MESSAGE_CHARS)}...` : firstLine;
  const jobLocation = jobCodeLocation(typeof fields.stack === 'string' ? fields.stack : undefined, code);
  return { errorName, errorMessage, ...(jobLocation === undefined ? {} : { jobLocation }), attempt };
}
