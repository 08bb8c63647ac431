// Compute emulation: runs a function's bundled asset (what `cdk deploy` uploads) as Lambda would: each execution
// environment a child process on the template's Node major, from a Lambda-shaped folder outside the repo (see
// sandbox.ts), with only the function's environment, a Lambda-shaped context, its timeout and its concurrency cap.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { delimiter, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { cpuProfileArgs, profilingChildren } from './cpuProfile';
import { hostRuntime, type ResolvedNode, resolveNodeFor } from './nodeRuntimes';
import { LambdaSandbox, type SandboxEnvironment } from './sandbox';

export interface FunctionSpec {
  name: string;
  arn: string;
  /** "file.export", as in the template; the file is resolved inside the asset. */
  handler: string;
  /** Folder of the bundled asset (cdk.out/asset.<hash>); copied into the sandbox as Lambda's /var/task. */
  codeDir: string;
  /** Layer content folders: extracted in order into the sandbox's /opt, so each one's nodejs/node_modules is on NODE_PATH. */
  layerDirs?: string[];
  /** The function's environment variables: with the runtime's own (NODE_PATH, TZ, ...) the process's whole environment. */
  environment: Record<string, string>;
  timeoutSeconds: number;
  /** Reserved concurrency; absent means the function shares the local unreserved cap. */
  reservedConcurrency?: number;
  /** The Node heap limit (--max-old-space-size) of each execution environment. Absent: Node's default. */
  memoryMb?: number;
  /**
   * The template's Runtime ("nodejs22.x"): the Node major the execution environments run on.
   * @default the host's major (hostRuntime())
   */
  runtime?: string;
  /** The template's architecture ("arm64" or "x86_64"): reported when it is not the host's, never emulated. */
  architecture?: string;
  /**
   * Retries of a failed asynchronous invocation (an EventInvokeConfig's MaximumRetryAttempts), 0 to 2.
   * @default 2
   */
  maximumRetryAttempts?: number;
  /**
   * How long an asynchronous event may wait to be delivered (MaximumEventAgeInSeconds), in wall-clock seconds. AWS
   * accepts 60 to 21600; locally any positive number is taken, since the retry delays are scaled down to seconds.
   * @default 21600
   */
  maximumEventAgeSeconds?: number;
}

/** Why an asynchronous event was given up on, as Lambda's on-failure destination record says. */
export type AsyncFailureCondition = 'RetriesExhausted' | 'EventAgeExceeded';

export interface AsyncFailureInfo {
  /** The request ID the event was accepted under (every attempt and duplicate delivery of it shares it). */
  requestId: string;
  /** Attempts made (0 when the event expired before its first). */
  attempts: number;
  condition: AsyncFailureCondition;
}

export interface RuntimeOptions {
  /** Receives every line the function writes (stdout and stderr), prefixed by nothing. */
  log: (functionName: string, line: string) => void;
  /**
   * Concurrency for functions without reserved concurrency. AWS allows 1000 per account; two cores do not.
   * @default 10
   */
  unreservedConcurrency?: number;
  /**
   * Delays before the retries of a failed asynchronous invocation (the last one repeats when a function allows more
   * retries than listed). AWS waits about 1 and 2 minutes; the local runtime scales that down so a demo settles in
   * seconds.
   * @default [1000, 2000]
   */
  asyncRetryDelaysMs?: number[];
  /**
   * Called when an asynchronous event is given up on: every allowed attempt failed, or it grew older than the
   * function's maximum event age. The caller sends it to the function's DLQ or on-failure destination.
   */
  onAsyncFailure?: (functionName: string, event: unknown, error: Error, info: AsyncFailureInfo) => void;
  /**
   * Lambda's asynchronous queue delivers an event at least once, not exactly once: the probability (0 to 1) that an
   * accepted event is delivered a second time.
   * @default 0
   */
  asyncDuplicateRate?: number;
  /**
   * The random source of asyncDuplicateRate (a test fixes it).
   * @default Math.random
   */
  random?: () => number;
  /**
   * Fault injection (the chaos harness): asked once per invocation; a number stops the execution environment that
   * many milliseconds into the invocation, as a crash would, wherever the handler is. Absent: never.
   */
  killAfterMs?: (functionName: string) => number | undefined;
  /**
   * Fault injection at a moment the caller picks (the chaos harness kills a producer between the requests of a page):
   * called as each invocation starts, with its event and a handle that can kill it later. Absent: never.
   */
  onInvoke?: (functionName: string, event: unknown, invocation: InvocationHandle) => void;
}

/** One running invocation, as the onInvoke fault hook sees it. */
export interface InvocationHandle {
  /** Stops the execution environment now, as a crash would, wherever the handler is; false when it had already ended. */
  kill(): boolean;
  /** The invocation has ended (answered, failed, timed out or killed). */
  readonly ended: boolean;
}

/** One kind of error a function produced, for the run report. */
export interface FunctionErrorSummary {
  errorType: string;
  /** The first line of the error message, shortened. */
  message: string;
  count: number;
  /** The first few full messages (at most three). */
  examples: string[];
}

export class FunctionError extends Error {
  /** The handler's own error message, without the runtime's prefixes: what Lambda hands a DLQ or a destination. */
  public errorMessage?: string;

  constructor(
    message: string,
    public readonly functionName: string,
    public readonly errorType: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'FunctionError';
  }
}

export class FunctionTimeoutError extends FunctionError {
  constructor(
    functionName: string,
    public readonly timeoutSeconds: number,
  ) {
    super(
      `${functionName}: Task timed out after ${timeoutSeconds.toFixed(2)} seconds`,
      functionName,
      'Sandbox.Timedout',
    );
    this.name = 'FunctionTimeoutError';
  }
}

/** Lambda's TooManyRequestsException: every concurrent execution the function may have is busy. */
export class ThrottledInvocationError extends FunctionError {
  constructor(functionName: string, limit: number) {
    super(
      `${functionName}: Rate Exceeded (concurrency limit ${limit} reached)`,
      functionName,
      'TooManyRequestsException',
    );
    this.name = 'ThrottledInvocationError';
  }
}

export class FunctionNotFoundError extends Error {
  constructor(public readonly functionName: string) {
    super(`Function not found: ${functionName}`);
    this.name = 'FunctionNotFoundError';
  }
}

/** A FunctionSpec or RuntimeOptions value outside what Lambda (or this runtime) accepts. */
export class FunctionConfigError extends Error {
  constructor(
    public readonly functionName: string,
    problems: string[],
  ) {
    super(`${functionName}: invalid function configuration: ${problems.join('; ')}`);
    this.name = 'FunctionConfigError';
  }
}

/** What the bootstrap (sandbox.ts) answers over the IPC channel. */
interface BootstrapReply {
  id: string;
  type?: 'crash';
  ok?: boolean;
  /** The failure happened while loading the handler (Lambda's init phase). */
  init?: boolean;
  value?: unknown;
  crashType?: string;
  error?: { errorType: string; errorMessage: string; stack?: string[] };
}

interface PendingAsync {
  event: unknown;
  requestId: string;
  /** Attempts made so far (a throttled one does not count). */
  attempts: number;
  acceptedAt: number;
  lastError?: Error;
}

/** One execution environment: a child process running the bootstrap. */
interface Environment {
  child: ChildProcess;
  exited: Promise<void>;
}

/** Lambda's limit on the init phase of an on-demand execution environment. */
const INIT_TIMEOUT_MS = 10_000;
const MAX_EXAMPLES = 3;

const firstLine = (message: string): string => {
  const line = message.split('\n')[0];
  return line.length > 160 ? `${line.slice(0, 157)}...` : line;
};

/** One function: a pool of warm execution environments bounded by its concurrency. */
export class LocalFunction {
  public readonly concurrencyLimit: number;
  /** The Node binary its environments run on, and how it differs from the template's runtime. */
  public readonly node: ResolvedNode;
  private readonly idle: Environment[] = [];
  private readonly all = new Set<Environment>();
  private busy = 0;
  private warming = 0;
  private peak = 0;
  private invocations = 0;
  private timeouts = 0;
  private duplicates = 0;
  private readonly errors = new Map<string, FunctionErrorSummary>();
  private readonly asyncQueue: PendingAsync[] = [];
  private asyncScheduled = 0;
  private closed = false;
  private readonly sandbox: LambdaSandbox;
  private readonly ownsSandbox: boolean;
  private readonly paths: SandboxEnvironment;
  private readonly maximumRetryAttempts: number;
  private readonly maximumEventAgeMs: number;

  /**
   * @param sandbox the runtime's sandbox folder, shared by its functions (LambdaRuntime passes it); absent, the
   * function lays out one of its own and removes it on close().
   * @throws FunctionConfigError for an out-of-range retry count, event age or duplicate rate; SandboxError when the
   * asset or a layer folder is missing.
   */
  constructor(
    public readonly spec: FunctionSpec,
    private readonly options: RuntimeOptions,
    sandbox?: LambdaSandbox,
  ) {
    const problems: string[] = [];
    const retries = spec.maximumRetryAttempts ?? 2;
    if (!Number.isInteger(retries) || retries < 0 || retries > 2)
      problems.push(`maximumRetryAttempts must be an integer from 0 to 2, not ${retries}`);
    const age = spec.maximumEventAgeSeconds ?? 21600;
    if (!(age > 0 && age <= 21600))
      problems.push(`maximumEventAgeSeconds must be more than 0 and at most 21600, not ${age}`);
    const rate = options.asyncDuplicateRate ?? 0;
    if (!(rate >= 0 && rate <= 1)) problems.push(`asyncDuplicateRate must be from 0 to 1, not ${rate}`);
    if (problems.length) throw new FunctionConfigError(spec.name, problems);
    this.maximumRetryAttempts = retries;
    this.maximumEventAgeMs = age * 1000;
    this.concurrencyLimit = spec.reservedConcurrency ?? options.unreservedConcurrency ?? 10;
    this.node = resolveNodeFor(spec.runtime ?? hostRuntime(), spec.architecture);
    this.ownsSandbox = !sandbox;
    this.sandbox = sandbox ?? new LambdaSandbox();
    try {
      const major = Number(/^v(\d+)/.exec(this.node.version)![1]);
      this.paths = this.sandbox.prepare(spec.name, spec.codeDir, spec.layerDirs ?? [], major);
    } catch (error) {
      if (this.ownsSandbox) this.sandbox.close();
      throw error;
    }
    if (this.ownsSandbox && this.sandbox.leaks.length) {
      options.log(
        spec.name,
        `sandbox: Node would also look in ${this.sandbox.leaks.join(', ')}, which Lambda has no counterpart of`,
      );
    }
  }

  /** Executions running now. */
  get inFlight(): number {
    return this.busy;
  }

  /** The most executions that ever ran at once. */
  get peakConcurrency(): number {
    return this.peak;
  }

  /** Idle warm execution environments. */
  get warmCount(): number {
    return this.idle.length;
  }

  get invocationCount(): number {
    return this.invocations;
  }

  /** Invocations stopped at their timeout. */
  get timeoutCount(): number {
    return this.timeouts;
  }

  /** Asynchronous events accepted but not yet finished (queued, running or waiting for a retry). */
  get pendingAsync(): number {
    return this.asyncQueue.length + this.asyncScheduled;
  }

  /** Asynchronous events delivered a second time on purpose (asyncDuplicateRate). */
  get duplicateAsyncDeliveries(): number {
    return this.duplicates;
  }

  /**
   * The errors its invocations ended with, one entry per error type and first message line, most frequent first:
   * init failures (Runtime.ImportModuleError, Runtime.HandlerNotFound, ...), handler errors, timeouts
   * (Sandbox.Timedout) and crashes (Runtime.ExitError). Throttles are not function errors and are not counted; a
   * module that fails at prewarm is counted when an invocation meets it.
   */
  errorSummary(): FunctionErrorSummary[] {
    return [...this.errors.values()]
      .map((e) => ({ ...e, examples: [...e.examples] }))
      .sort((a, b) => b.count - a.count);
  }

  private recordError(error: FunctionError): void {
    // The message without the "<function>: <type>: " prefix the FunctionError message carries.
    let message = error.message.startsWith(`${this.spec.name}: `)
      ? error.message.slice(this.spec.name.length + 2)
      : error.message;
    if (message.startsWith(`${error.errorType}: `)) message = message.slice(error.errorType.length + 2);
    const short = firstLine(message);
    const key = `${error.errorType}\u0000${short}`;
    const entry = this.errors.get(key) ?? { errorType: error.errorType, message: short, count: 0, examples: [] };
    entry.count++;
    if (entry.examples.length < MAX_EXAMPLES) entry.examples.push(error.message);
    this.errors.set(key, entry);
  }

  /**
   * A synchronous (RequestResponse) invocation.
   * @throws ThrottledInvocationError when every allowed execution is busy; FunctionError when the handler threw, its
   * module failed to load or its environment crashed; FunctionTimeoutError when it ran past its timeout (the
   * execution environment is destroyed).
   */
  invoke(event: unknown): Promise<unknown> {
    return this.invokeAs(event, randomUUID());
  }

  private async invokeAs(event: unknown, requestId: string): Promise<unknown> {
    if (this.closed)
      throw new FunctionError(`${this.spec.name}: the local runtime is stopping`, this.spec.name, 'ServiceException');
    if (this.busy >= this.concurrencyLimit) throw new ThrottledInvocationError(this.spec.name, this.concurrencyLimit);
    this.busy++;
    this.peak = Math.max(this.peak, this.busy);
    this.invocations++;
    try {
      return await this.run(event, requestId);
    } catch (error) {
      if (error instanceof FunctionError && !this.closed) this.recordError(error);
      throw error;
    } finally {
      this.busy--;
      this.drainAsync();
    }
  }

  /**
   * An asynchronous (Event) invocation: accepted at once, run when a slot frees, retried on error up to the function's
   * maximumRetryAttempts; with asyncDuplicateRate, sometimes delivered twice.
   * @returns the request ID the event was accepted under.
   */
  invokeAsync(event: unknown): string {
    const item: PendingAsync = { event, requestId: randomUUID(), attempts: 0, acceptedAt: Date.now() };
    this.asyncQueue.push(item);
    const rate = this.options.asyncDuplicateRate ?? 0;
    if (rate > 0 && (this.options.random ?? Math.random)() < rate) {
      // A second, independent delivery of the same event (same request ID), with retries of its own.
      this.duplicates++;
      this.asyncQueue.push({ ...item });
    }
    this.drainAsync();
    return item.requestId;
  }

  private giveUp(item: PendingAsync, condition: AsyncFailureCondition, error: Error): void {
    this.options.onAsyncFailure?.(this.spec.name, item.event, error, {
      requestId: item.requestId,
      attempts: item.attempts,
      condition,
    });
  }

  private drainAsync(): void {
    while (!this.closed && this.asyncQueue.length > 0 && this.busy < this.concurrencyLimit) {
      const item = this.asyncQueue.shift()!;
      const ageMs = Date.now() - item.acceptedAt;
      if (ageMs > this.maximumEventAgeMs) {
        const expired = new FunctionError(
          `${this.spec.name}: EventAgeExceeded: the event waited ${(ageMs / 1000).toFixed(2)} s, longer than the maximum event age of ${this.maximumEventAgeMs / 1000} s`,
          this.spec.name,
          'EventAgeExceeded',
          item.lastError ? { cause: item.lastError } : undefined,
        );
        this.options.log(this.spec.name, `async event ${item.requestId} dropped: ${expired.message}`);
        this.giveUp(item, 'EventAgeExceeded', item.lastError ?? expired);
        continue;
      }
      this.asyncScheduled++;
      this.invokeAs(item.event, item.requestId)
        .catch((error: Error) => {
          if (this.closed) return;
          if (error instanceof ThrottledInvocationError) {
            // Throttled events go back to the queue without spending a retry, as Lambda's async queue does.
            this.asyncQueue.unshift(item);
            return;
          }
          item.attempts++;
          item.lastError = error;
          if (item.attempts <= this.maximumRetryAttempts) {
            const delays = this.options.asyncRetryDelaysMs ?? [1000, 2000];
            const delay = delays[Math.min(item.attempts - 1, delays.length - 1)] ?? 0;
            this.options.log(
              this.spec.name,
              `async invocation failed (${error.message}); retry ${item.attempts} of ${this.maximumRetryAttempts}`,
            );
            this.asyncScheduled++;
            setTimeout(() => {
              this.asyncScheduled--;
              this.asyncQueue.push(item);
              this.drainAsync();
            }, delay).unref();
          } else {
            this.giveUp(item, 'RetriesExhausted', error);
          }
        })
        .finally(() => {
          this.asyncScheduled--;
          this.drainAsync();
        });
    }
  }

  /**
   * Starts execution environments and loads the code until `count` are warm. Ten cold starts at once on a two-core
   * machine stall each other (and every running timer) for seconds, which AWS, giving each execution environment its
   * own CPU share, never does; loading up front, two at a time, keeps local timing close to AWS's. A module that fails
   * to load is left for the first invocation to report, as Lambda's init phase would.
   */
  async prewarm(count: number): Promise<void> {
    const wanted = Math.min(count, this.concurrencyLimit) - this.idle.length - this.busy - this.warming;
    for (let i = 0; i < wanted && !this.closed; i++) {
      this.warming++;
      const env = this.start();
      const id = randomUUID();
      const reply = await new Promise<BootstrapReply>((resolve) => {
        const settle = (r: BootstrapReply) => {
          clearTimeout(timer);
          env.child.off('message', onMessage);
          env.child.off('exit', onExit);
          env.child.channel?.unref();
          resolve(r);
        };
        const onMessage = (r: BootstrapReply) => {
          if (r.id === id && r.type !== 'crash') settle(r);
        };
        const onExit = (code: number | null, signal: string | null) =>
          settle({
            id,
            ok: false,
            error: {
              errorType: 'Runtime.ExitError',
              errorMessage: `Runtime exited ${signal ? `on signal ${signal}` : `with error: exit status ${code}`} during init`,
            },
          });
        const timer = setTimeout(
          () =>
            settle({
              id,
              ok: false,
              error: {
                errorType: 'Sandbox.Timedout',
                errorMessage: `init did not finish within ${INIT_TIMEOUT_MS / 1000} seconds`,
              },
            }),
          INIT_TIMEOUT_MS,
        );
        env.child.on('message', onMessage);
        env.child.once('exit', onExit);
        env.child.channel?.ref();
        this.send(env, { type: 'load', id });
      });
      this.warming--;
      if (!reply.ok) {
        this.options.log(this.spec.name, `prewarm: ${reply.error!.errorType}: ${reply.error!.errorMessage}`);
        await this.destroy(env);
        return;
      }
      if (this.closed) await this.destroy(env);
      else this.idle.push(env);
    }
  }

  /** The whole environment of an execution environment: Lambda's runtime variables, then the function's own. */
  private processEnvironment(): Record<string, string> {
    const p = this.paths;
    return {
      // Defaults of Lambda's runtime that a function may override (Lambda's bootstrap sets NODE_PATH only when unset).
      PATH: [dirname(this.node.execPath), '/usr/local/bin', '/usr/bin', '/bin', join(p.optDir, 'bin')].join(delimiter),
      LANG: 'en_US.UTF-8',
      TZ: ':UTC',
      NODE_PATH: p.nodePath,
      AWS_LAMBDA_FUNCTION_NAME: this.spec.name,
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${this.spec.name}`,
      ...(this.spec.memoryMb ? { AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(this.spec.memoryMb) } : {}),
      ...this.spec.environment,
      // Reserved: Lambda sets these whatever the function says, and here they must name the sandbox's real folders.
      LAMBDA_TASK_ROOT: p.taskDir,
      LAMBDA_RUNTIME_DIR: p.runtimeDir,
      _HANDLER: this.spec.handler,
      AWS_EXECUTION_ENV: `AWS_Lambda_${this.spec.runtime ?? hostRuntime()}`,
    };
  }

  private start(): Environment {
    // Lambda's bootstrap gives the heap the function's memory (less a margin); memoryMb is the limit here.
    const execArgv = [
      ...(this.spec.memoryMb ? [`--max-old-space-size=${Math.max(64, this.spec.memoryMb)}`] : []),
      ...cpuProfileArgs(this.spec.name),
    ];
    // The host's process.env is not inherited: Lambda's environment is the runtime's variables and the function's.
    const child = spawn(this.node.execPath, [...execArgv, this.paths.bootstrapPath], {
      cwd: this.paths.taskDir,
      env: this.processEnvironment(),
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      serialization: 'json',
    });
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({ input: stream }).on('line', (line) => this.options.log(this.spec.name, line));
    }
    // Idle environments must not keep the host process alive; an invocation holds it with its timer and the channel.
    child.unref();
    child.channel?.unref();
    for (const stream of [child.stdout, child.stderr] as unknown as { unref?: () => void }[]) stream.unref?.();
    const env: Environment = {
      child,
      exited: new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        // A binary that cannot start emits 'error' and maybe no 'exit'; the listener also keeps it from throwing.
        child.once('error', (error) => {
          this.options.log(this.spec.name, `execution environment failed to start: ${error.message}`);
          child.emit('exit', null, null);
        });
      }),
    };
    child.once('exit', () => {
      this.all.delete(env);
      const i = this.idle.indexOf(env);
      if (i >= 0) this.idle.splice(i, 1);
    });
    this.all.add(env);
    return env;
  }

  private send(env: Environment, message: object): void {
    try {
      env.child.send(message, (error) => error && env.child.kill('SIGKILL'));
    } catch {
      // The channel is already closed: the 'exit' listener reports the crash.
      env.child.kill('SIGKILL');
    }
  }

  /** Destroys an execution environment at once (SIGKILL: whatever the handler was doing stops). */
  private destroy(env: Environment): Promise<void> {
    const i = this.idle.indexOf(env);
    if (i >= 0) this.idle.splice(i, 1);
    if (env.child.exitCode === null && env.child.signalCode === null) {
      // Referenced again so that the host waits for the exit it awaits (close() before the host ends, for one).
      env.child.ref();
      env.child.kill('SIGKILL');
    }
    return env.exited;
  }

  /**
   * Ends an execution environment by closing its channel (the bootstrap then exits on its own), and kills it when it
   * has not gone within 5 s: only a process that exits writes its CPU profile (PACED_CPU_PROF_DIR).
   */
  private retire(env: Environment): Promise<void> {
    if (env.child.exitCode !== null || env.child.signalCode !== null) return env.exited;
    env.child.ref();
    const killer = setTimeout(() => env.child.kill('SIGKILL'), 5000);
    if (env.child.connected) env.child.disconnect();
    else env.child.kill('SIGKILL');
    return env.exited.finally(() => clearTimeout(killer));
  }

  private run(event: unknown, requestId: string): Promise<unknown> {
    const env = this.idle.pop() ?? this.start();
    const id = randomUUID();
    const timeoutMs = this.spec.timeoutSeconds * 1000;
    const deadline = Date.now() + timeoutMs;
    const name = this.spec.name;
    return new Promise((resolve, reject) => {
      const invocation = new Invocation(env, id, name, resolve, reject, {
        discard: () => void this.destroy(env),
        keep: () => (this.closed ? void this.destroy(env) : this.idle.push(env)),
      });
      const killMs = this.options.killAfterMs?.(name);
      if (killMs !== undefined)
        invocation.stopAfter(
          killMs,
          () =>
            new FunctionError(
              `${name}: Runtime.ExitError: execution environment killed ${killMs} ms into the invocation (fault injection)`,
              name,
              'Runtime.ExitError',
            ),
        );
      invocation.stopAfter(timeoutMs, () => {
        // The hard stop: the execution environment is destroyed mid-flight, whatever the handler was doing.
        this.timeouts++;
        return new FunctionTimeoutError(name, this.spec.timeoutSeconds);
      });
      invocation.listen();
      this.options.onInvoke?.(name, event, invocation.handle());
      // Killed as it started: the handler never sees the event, as when an environment dies before its init completes.
      if (!invocation.ended)
        this.send(env, {
          type: 'invoke',
          id,
          event,
          deadline,
          requestId,
          functionName: name,
          functionArn: this.spec.arn,
          memoryMb: this.spec.memoryMb ?? 128,
        });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.asyncQueue.length = 0;
    await Promise.all([...this.all].map((env) => (profilingChildren() ? this.retire(env) : this.destroy(env))));
    this.idle.length = 0;
    if (this.ownsSandbox) this.sandbox.close();
  }
}

/** What an invocation does with its execution environment when it ends. */
interface EnvironmentRelease {
  /** The environment is unusable (stopped mid-flight, or its init failed): destroy it. */
  discard(): void;
  /** The handler answered (a value or an error): the environment may serve the next invocation. */
  keep(): void;
}

/**
 * One invocation on its execution environment, from the invoke message to its end. Whichever comes first settles
 * it: the bootstrap's reply, the environment's exit (a crash), a timer (the timeout, fault injection) or the onInvoke
 * hook's kill.
 */
class Invocation {
  private isEnded = false;
  /** The crash the bootstrap reported just before it exits: the cause the exit's error names. */
  private crash: BootstrapReply | undefined;
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly env: Environment,
    private readonly id: string,
    private readonly name: string,
    private readonly resolve: (value: unknown) => void,
    private readonly reject: (error: FunctionError) => void,
    private readonly release: EnvironmentRelease,
  ) {}

  get ended(): boolean {
    return this.isEnded;
  }

  /** Listens for the environment's replies and exit, and holds the host open (the channel) until the end. */
  listen(): void {
    this.env.child.on('message', this.onMessage);
    this.env.child.once('exit', this.onExit);
    this.env.child.channel?.ref();
  }

  /** Stops the invocation `ms` from now, with the error `reason` gives then, unless it has ended. */
  stopAfter(ms: number, reason: () => FunctionError): void {
    this.timers.push(setTimeout(() => this.stop(reason()), ms));
  }

  /** The onInvoke hook's handle on this invocation. */
  handle(): InvocationHandle {
    const kill = () => this.kill();
    const ended = () => this.isEnded;
    return {
      kill,
      get ended() {
        return ended();
      },
    };
  }

  private kill(): boolean {
    if (this.isEnded) return false;
    this.stop(
      new FunctionError(
        `${this.name}: Runtime.ExitError: execution environment killed by fault injection`,
        this.name,
        'Runtime.ExitError',
      ),
    );
    return true;
  }

  private readonly onMessage = (reply: BootstrapReply): void => {
    if (reply.id !== this.id) return;
    if (reply.type === 'crash') {
      // The bootstrap is about to exit; the 'exit' listener reports it with this cause.
      this.crash = reply;
      return;
    }
    const error = replyError(this.name, reply);
    if (reply.init) {
      // An init failure leaves no usable environment: Lambda starts the next invocation with a fresh one.
      this.stop(error!);
      return;
    }
    this.cleanup();
    this.release.keep();
    if (reply.ok) this.resolve(reply.value ?? null);
    else this.reject(error!);
  };

  private readonly onExit = (code: number | null, signal: string | null): void => {
    // A crash (uncaught error, process.exit) ends the execution environment; the next invocation starts cold.
    this.cleanup();
    this.reject(exitError(this.name, code, signal, this.crash));
  };

  /** Ends the invocation with `error`, destroying the environment whatever the handler was doing. */
  private stop(error: FunctionError): void {
    this.cleanup();
    this.release.discard();
    this.reject(error);
  }

  private cleanup(): void {
    this.isEnded = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.env.child.off('message', this.onMessage);
    this.env.child.off('exit', this.onExit);
    this.env.child.channel?.unref();
  }
}

/** All functions of the local stack, addressable by name or ARN, sharing one sandbox folder. */
export class LambdaRuntime {
  private readonly functions = new Map<string, LocalFunction>();
  private sandbox?: LambdaSandbox;

  constructor(private readonly options: RuntimeOptions) {}

  /** @throws FunctionConfigError, SandboxError (see LocalFunction) */
  add(spec: FunctionSpec): LocalFunction {
    if (!this.sandbox) {
      this.sandbox = new LambdaSandbox();
      if (this.sandbox.leaks.length)
        this.options.log(
          'lambda',
          `sandbox: Node would also look in ${this.sandbox.leaks.join(', ')}, which Lambda has no counterpart of`,
        );
    }
    const fn = new LocalFunction(spec, this.options, this.sandbox);
    this.functions.set(spec.name, fn);
    return fn;
  }

  /** @throws FunctionNotFoundError */
  get(nameOrArn: string): LocalFunction {
    // Accepts a name, a full ARN, or an ARN with a qualifier (":$LATEST").
    const match = /^arn:[^:]+:lambda:[^:]+:\d+:function:([^:]+)/.exec(nameOrArn);
    const fn = this.functions.get(match ? match[1] : nameOrArn);
    if (!fn) throw new FunctionNotFoundError(nameOrArn);
    return fn;
  }

  list(): LocalFunction[] {
    return [...this.functions.values()];
  }

  /** Which Node each function runs on, against what its template asked for (the report prints the inexact ones). */
  nodeReport(): { functionName: string; wanted: string; running: string; exact: boolean; note?: string }[] {
    return this.list().map((f) => ({
      functionName: f.spec.name,
      wanted: f.node.wanted,
      running: f.node.version,
      exact: f.node.exact,
      ...(f.node.note ? { note: f.node.note } : {}),
    }));
  }

  /** Asynchronous events delivered twice on purpose, over all functions. */
  get duplicateAsyncDeliveries(): number {
    return this.list().reduce((n, f) => n + f.duplicateAsyncDeliveries, 0);
  }

  /**
   * Warms each function up to its given environment count, two loads at a time (the machine's cores, not AWS's
   * limits, are the constraint here).
   */
  async prewarm(counts: Map<string, number>): Promise<void> {
    const queue = [...counts.entries()].flatMap(([name, n]) => Array.from({ length: n }, () => name));
    // Each load asks for one more than the function had when prewarm began plus the loads already asked for: counting
    // from warmCount alone, two lanes loading the same function at once would both ask for the same one.
    const base = new Map([...counts.keys()].map((name) => [name, this.get(name).inFlight + this.get(name).warmCount]));
    const asked = new Map<string, number>();
    const lane = async () => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
        const n = (asked.get(name) ?? 0) + 1;
        asked.set(name, n);
        await this.get(name).prewarm(base.get(name)! + n);
      }
    };
    await Promise.all([lane(), lane()]);
  }

  /** True when no function is running or holding an asynchronous event. */
  isIdle(): boolean {
    return this.list().every((f) => f.inFlight === 0 && f.pendingAsync === 0);
  }

  async close(): Promise<void> {
    await Promise.all(this.list().map((f) => f.close()));
    this.sandbox?.close();
    this.sandbox = undefined;
  }
}

/** The error a bootstrap's reply reports, as Lambda names it (`<function>: <type>: <message>`); none for a success. */
function replyError(name: string, reply: BootstrapReply): FunctionError | undefined {
  if (!reply.error) return undefined;
  const error = new FunctionError(
    `${name}: ${reply.error.errorType}: ${reply.error.errorMessage}`,
    name,
    reply.error.errorType,
  );
  error.errorMessage = reply.error.errorMessage;
  return error;
}

/** Lambda's Runtime.ExitError for an environment that ended mid-invocation, with the crash the bootstrap reported. */
function exitError(
  name: string,
  code: number | null,
  signal: string | null,
  crash: BootstrapReply | undefined,
): FunctionError {
  const status = signal ? `signal: ${signal}` : `exit status ${code}`;
  const cause = crash?.error ? ` (${crash.crashType}: ${crash.error.errorType}: ${crash.error.errorMessage})` : '';
  return new FunctionError(
    `${name}: Runtime.ExitError: Runtime exited with error: ${status}${cause}`,
    name,
    'Runtime.ExitError',
  );
}
