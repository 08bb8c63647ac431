// Compute emulation: runs a function's bundled asset (what `cdk deploy` uploads) in worker threads, one warm worker per
// concurrent execution, with the function's environment, a Lambda-shaped context, its timeout and its concurrency cap.
import { randomUUID } from 'node:crypto';
import { delimiter, dirname, join, resolve as resolvePath } from 'node:path';
import { existsSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { createInterface } from 'node:readline';

export interface FunctionSpec {
  name: string;
  arn: string;
  /** "file.export", as in the template; the file is resolved inside codeDir. */
  handler: string;
  /** Folder of the bundled asset (cdk.out/asset.<hash>). */
  codeDir: string;
  /** Layer content folders (Lambda's /opt): each one's nodejs/node_modules joins the module path, first to last. */
  layerDirs?: string[];
  environment: Record<string, string>;
  timeoutSeconds: number;
  /** Reserved concurrency; absent means the function shares the local unreserved cap. */
  reservedConcurrency?: number;
  memoryMb?: number;
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
   * Delays before the two retries of a failed asynchronous invocation. AWS waits about 1 and 2 minutes; the local
   * runtime scales that down so a demo settles in seconds.
   * @default [1000, 2000]
   */
  asyncRetryDelaysMs?: number[];
  /** Called when an asynchronous invocation failed on every attempt (AWS would send it to the on-failure destination). */
  onAsyncFailure?: (functionName: string, event: unknown, error: Error) => void;
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

export class FunctionError extends Error {
  constructor(message: string, public readonly functionName: string, public readonly errorType: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'FunctionError';
  }
}

export class FunctionTimeoutError extends FunctionError {
  constructor(functionName: string, public readonly timeoutSeconds: number) {
    super(`${functionName}: Task timed out after ${timeoutSeconds.toFixed(2)} seconds`, functionName, 'Sandbox.Timedout');
    this.name = 'FunctionTimeoutError';
  }
}

/** Lambda's TooManyRequestsException: every concurrent execution the function may have is busy. */
export class ThrottledInvocationError extends FunctionError {
  constructor(functionName: string, limit: number) {
    super(`${functionName}: Rate Exceeded (concurrency limit ${limit} reached)`, functionName, 'TooManyRequestsException');
    this.name = 'ThrottledInvocationError';
  }
}

export class FunctionNotFoundError extends Error {
  constructor(public readonly functionName: string) {
    super(`Function not found: ${functionName}`);
    this.name = 'FunctionNotFoundError';
  }
}

/*
 * The worker's code, as a string evaluated in each thread: a worker starts without the TypeScript loader, and the
 * bundle it loads is plain CommonJS anyway. It loads the handler once (a warm container) and answers invoke messages.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
// The Lambda Node.js runtime provides AWS SDK v3, so CDK bundles leave @aws-sdk/* out. The same role falls to the
// project's installed SDK: it joins the global module paths (NODE_PATH) of this thread only.
if (workerData.runtimeNodePath) {
  process.env.NODE_PATH = workerData.runtimeNodePath;
  require('node:module')._initPaths();
}
let handler;
function load() {
  if (handler) return handler;
  const mod = require(workerData.modulePath);
  handler = mod[workerData.exportName];
  if (typeof handler !== 'function') {
    const e = new Error('Handler ' + workerData.exportName + ' is not a function in ' + workerData.modulePath);
    e.name = 'Runtime.HandlerNotFound';
    throw e;
  }
  return handler;
}
const serializeError = (e) => ({ errorType: (e && e.name) || 'Error', errorMessage: (e && e.message) || String(e), stack: e && e.stack });
parentPort.on('message', async (msg) => {
  if (msg.type === 'load') {
    try { load(); parentPort.postMessage({ id: msg.id, ok: true, value: null }); }
    catch (e) { parentPort.postMessage({ id: msg.id, ok: false, error: serializeError(e) }); }
    return;
  }
  const context = {
    functionName: workerData.functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: workerData.functionArn,
    memoryLimitInMB: String(workerData.memoryMb),
    awsRequestId: msg.requestId,
    logGroupName: '/aws/lambda/' + workerData.functionName,
    logStreamName: 'local/' + workerData.functionName,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, msg.deadline - Date.now()),
    done() {}, fail() {}, succeed() {},
  };
  try {
    const fn = load();
    const value = fn.length >= 3
      ? await new Promise((resolve, reject) => { const r = fn(msg.event, context, (err, v) => (err ? reject(err) : resolve(v))); if (r && typeof r.then === 'function') r.then(resolve, reject); })
      : await fn(msg.event, context);
    parentPort.postMessage({ id: msg.id, ok: true, value: value === undefined ? null : JSON.parse(JSON.stringify(value)) });
  } catch (e) {
    parentPort.postMessage({ id: msg.id, ok: false, error: serializeError(e) });
  }
});
`;

/** The node_modules folder that holds the AWS SDK v3 packages this project installs (the runtime's provided SDK). */
const RUNTIME_NODE_PATH = resolvePath(dirname(require.resolve('@aws-sdk/client-sqs/package.json')), '..', '..');

interface WorkerReply {
  id: string;
  ok: boolean;
  value?: unknown;
  error?: { errorType: string; errorMessage: string; stack?: string };
}

interface PendingAsync {
  event: unknown;
  attempt: number;
}

/** One function: a pool of warm workers bounded by its concurrency. */
export class LocalFunction {
  public readonly concurrencyLimit: number;
  private readonly idle: Worker[] = [];
  private readonly all = new Set<Worker>();
  private busy = 0;
  private warming = 0;
  private peak = 0;
  private invocations = 0;
  private timeouts = 0;
  private readonly asyncQueue: PendingAsync[] = [];
  private asyncScheduled = 0;
  private closed = false;
  private readonly modulePath: string;
  private readonly exportName: string;

  constructor(public readonly spec: FunctionSpec, private readonly options: RuntimeOptions) {
    this.concurrencyLimit = spec.reservedConcurrency ?? options.unreservedConcurrency ?? 10;
    const dot = spec.handler.lastIndexOf('.');
    const file = spec.handler.slice(0, dot);
    this.exportName = spec.handler.slice(dot + 1);
    const base = resolvePath(spec.codeDir, file);
    this.modulePath = ['.js', '.cjs', '.mjs', ''].map((ext) => base + ext).find((p) => existsSync(p)) ?? `${base}.js`;
  }

  /** Executions running now. */
  get inFlight(): number {
    return this.busy;
  }

  /** The most executions that ever ran at once. */
  get peakConcurrency(): number {
    return this.peak;
  }

  /** Idle warm workers. */
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

  /**
   * A synchronous (RequestResponse) invocation.
   * @throws ThrottledInvocationError when every allowed execution is busy; FunctionError when the handler threw;
   * FunctionTimeoutError when it ran past its timeout (the execution is stopped).
   */
  async invoke(event: unknown): Promise<unknown> {
    if (this.closed) throw new FunctionError(`${this.spec.name}: the local runtime is stopping`, this.spec.name, 'ServiceException');
    if (this.busy >= this.concurrencyLimit) throw new ThrottledInvocationError(this.spec.name, this.concurrencyLimit);
    this.busy++;
    this.peak = Math.max(this.peak, this.busy);
    this.invocations++;
    try {
      return await this.run(event);
    } finally {
      this.busy--;
      this.drainAsync();
    }
  }

  /** An asynchronous (Event) invocation: accepted at once, run when a slot frees, retried twice on error. */
  invokeAsync(event: unknown): void {
    this.asyncQueue.push({ event, attempt: 0 });
    this.drainAsync();
  }

  private drainAsync(): void {
    while (!this.closed && this.asyncQueue.length > 0 && this.busy < this.concurrencyLimit) {
      const item = this.asyncQueue.shift()!;
      this.asyncScheduled++;
      this.invoke(item.event)
        .catch((error: Error) => {
          if (this.closed) return;
          const delays = this.options.asyncRetryDelaysMs ?? [1000, 2000];
          if (error instanceof ThrottledInvocationError) {
            // Throttled events go back to the queue without spending a retry, as Lambda's async queue does.
            this.asyncQueue.unshift(item);
          } else if (item.attempt < delays.length) {
            this.options.log(this.spec.name, `async invocation failed (${error.message}); retry ${item.attempt + 1} of ${delays.length}`);
            this.asyncScheduled++;
            setTimeout(() => {
              this.asyncScheduled--;
              this.asyncQueue.push({ event: item.event, attempt: item.attempt + 1 });
              this.drainAsync();
            }, delays[item.attempt]).unref();
          } else {
            this.options.onAsyncFailure?.(this.spec.name, item.event, error);
          }
        })
        .finally(() => {
          this.asyncScheduled--;
          this.drainAsync();
        });
    }
  }

  /**
   * Starts workers and loads the code until `count` are warm. Ten cold starts at once on a two-core machine stall each
   * other (and every running timer) for seconds, which AWS, giving each execution environment its own CPU share,
   * never does; loading up front, two at a time, keeps local timing close to AWS's. A module that fails to load is
   * left for the first invocation to report, as Lambda's init phase would.
   */
  async prewarm(count: number): Promise<void> {
    const wanted = Math.min(count, this.concurrencyLimit) - this.idle.length - this.busy - this.warming;
    for (let i = 0; i < wanted && !this.closed; i++) {
      this.warming++;
      const worker = this.spawn();
      const id = randomUUID();
      const reply = await new Promise<WorkerReply>((resolve) => {
        const onMessage = (r: WorkerReply) => {
          if (r.id !== id) return;
          worker.off('message', onMessage);
          resolve(r);
        };
        worker.on('message', onMessage);
        worker.once('error', (error) => resolve({ id, ok: false, error: { errorType: 'Runtime.ExitError', errorMessage: error.message } }));
        worker.postMessage({ type: 'load', id });
      });
      this.warming--;
      if (!reply.ok) {
        this.options.log(this.spec.name, `prewarm: ${reply.error!.errorType}: ${reply.error!.errorMessage}`);
        await worker.terminate();
        return;
      }
      if (this.closed) await worker.terminate();
      else this.idle.push(worker);
    }
  }

  private spawn(): Worker {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      env: { ...this.spec.environment },
      stdout: true,
      stderr: true,
      workerData: {
        modulePath: this.modulePath,
        exportName: this.exportName,
        functionName: this.spec.name,
        functionArn: this.spec.arn,
        memoryMb: this.spec.memoryMb ?? 128,
        runtimeNodePath: [...(this.spec.layerDirs ?? []).map((d) => join(d, 'nodejs', 'node_modules')), RUNTIME_NODE_PATH].join(delimiter),
      },
      resourceLimits: this.spec.memoryMb ? { maxOldGenerationSizeMb: Math.max(64, this.spec.memoryMb) } : undefined,
    });
    for (const stream of [worker.stdout, worker.stderr]) {
      createInterface({ input: stream }).on('line', (line) => this.options.log(this.spec.name, line));
    }
    worker.unref();
    this.all.add(worker);
    worker.once('exit', () => this.all.delete(worker));
    return worker;
  }

  private run(event: unknown): Promise<unknown> {
    const worker = this.idle.pop() ?? this.spawn();
    const id = randomUUID();
    const timeoutMs = this.spec.timeoutSeconds * 1000;
    const deadline = Date.now() + timeoutMs;
    return new Promise((resolve, reject) => {
      let ended = false;
      const cleanup = () => {
        ended = true;
        clearTimeout(timer);
        clearTimeout(killer);
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      const onMessage = (reply: WorkerReply) => {
        if (reply.id !== id) return;
        cleanup();
        if (!this.closed) this.idle.push(worker);
        if (reply.ok) resolve(reply.value);
        else reject(new FunctionError(`${this.spec.name}: ${reply.error!.errorType}: ${reply.error!.errorMessage}`, this.spec.name, reply.error!.errorType));
      };
      const onError = (error: Error) => {
        // An uncaught error kills the execution environment, as in Lambda; the next invocation starts cold.
        cleanup();
        void worker.terminate();
        reject(new FunctionError(`${this.spec.name}: Runtime.ExitError: ${error.message}`, this.spec.name, 'Runtime.ExitError', { cause: error }));
      };
      const onExit = (code: number) => {
        cleanup();
        reject(new FunctionError(`${this.spec.name}: Runtime.ExitError: exited with code ${code}`, this.spec.name, 'Runtime.ExitError'));
      };
      const killMs = this.options.killAfterMs?.(this.spec.name);
      const killer =
        killMs === undefined
          ? undefined
          : setTimeout(() => {
              cleanup();
              void worker.terminate();
              reject(new FunctionError(`${this.spec.name}: Runtime.ExitError: execution environment killed ${killMs} ms into the invocation (fault injection)`, this.spec.name, 'Runtime.ExitError'));
            }, killMs);
      const timer = setTimeout(() => {
        cleanup();
        // The hard stop: the execution environment is destroyed mid-flight, whatever the handler was doing.
        this.timeouts++;
        void worker.terminate();
        reject(new FunctionTimeoutError(this.spec.name, this.spec.timeoutSeconds));
      }, timeoutMs);
      worker.on('message', onMessage);
      worker.once('error', onError);
      worker.once('exit', onExit);
      this.options.onInvoke?.(this.spec.name, event, {
        kill: () => {
          if (ended) return false;
          cleanup();
          void worker.terminate();
          reject(new FunctionError(`${this.spec.name}: Runtime.ExitError: execution environment killed by fault injection`, this.spec.name, 'Runtime.ExitError'));
          return true;
        },
        get ended() {
          return ended;
        },
      });
      // Killed as it started: the handler never sees the event, as when an environment dies before its init completes.
      if (!ended) worker.postMessage({ id, event, deadline, requestId: randomUUID() });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.asyncQueue.length = 0;
    await Promise.all([...this.all].map((w) => w.terminate()));
    this.idle.length = 0;
  }
}

/** All functions of the local stack, addressable by name or ARN. */
export class LambdaRuntime {
  private readonly functions = new Map<string, LocalFunction>();

  constructor(private readonly options: RuntimeOptions) {}

  add(spec: FunctionSpec): LocalFunction {
    const fn = new LocalFunction(spec, this.options);
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

  /**
   * Warms each function up to its given worker count, two loads at a time (the machine's cores, not AWS's limits, are
   * the constraint here).
   */
  async prewarm(counts: Map<string, number>): Promise<void> {
    const queue = [...counts.entries()].flatMap(([name, n]) => Array.from({ length: n }, () => name));
    const lane = async () => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
        const fn = this.get(name);
        await fn.prewarm(fn.inFlight + fn.warmCount + 1);
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
  }
}
