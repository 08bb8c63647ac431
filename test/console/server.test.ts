// The console's HTTP server on a fake ConsoleSource: what it serves (the page with its token, the assets, the API) and
// every request it must refuse (no or wrong token, a foreign Host or Origin, a change while changes are off), with the
// source's action never called; and no credential in any answer.
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import {
  CONTENT_SECURITY_POLICY,
  foreignRequest,
  redactor,
  startConsoleServer,
  tokensEqual,
  unauthorizedApiRequest,
  type ConsoleServer,
  type ConsoleServerOptions,
} from '../../console/server';
import type { ConsoleOverview, ConsoleSource } from '../../console/source';
import type { AdmissionResult } from '../../ops/commands/admission';
import type { PeekedMessage } from '../../ops/commands/dlqPeek';
import { UsageError } from '../../ops/errors';

const TOKEN = 'test-token-0123456789abcdefghijklmnop';
const SECRET_KEY = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const ACCESS_KEY = 'AKIAIOSFODNN7EXAMPLE';
const SESSION_TOKEN = 'FwoGZXIvYXdzEXAMPLEsessionTOKEN+value/abc==';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json(): Record<string, unknown>;
}

/** One request with exactly these headers (fetch would not let a test set Host or Origin). */
function send(
  port: number,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'GET',
        path: options.path,
        headers: { host: `127.0.0.1:${port}`, ...options.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            json: () => JSON.parse(body) as Record<string, unknown>,
          });
        });
      },
    );
    req.on('error', reject);
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}

const steps = (command: 'pause' | 'resume'): AdmissionResult => ({
  ok: true,
  command,
  dryRun: false,
  steps: [
    {
      job: 'alpha',
      kind: 'schedule',
      target: 'alpha-schedule',
      before: 'ENABLED',
      desired: 'DISABLED',
      needed: true,
      applied: true,
    },
  ],
});

function overview(): ConsoleOverview {
  return {
    stack: 'PacedJobs-test',
    source: 'local',
    at: '2026-03-10T02:00:00.000Z',
    jobs: [
      {
        job: 'alpha',
        schedule: {
          name: 'alpha-schedule',
          state: 'ENABLED',
          expression: 'cron(0 2 * * ? *)',
          timeZone: 'UTC',
          nextFire: '2026-03-11T02:00:00.000Z',
          businessDate: '2026-03-10',
        },
        mappings: { consumer: 'Enabled', admission: 'Enabled' },
        paused: false,
        queue: { url: 'http://sqs/alpha', visible: 1, inFlight: 0, delayed: 2 },
        dlq: { url: 'http://sqs/alpha-dlq', visible: 0, inFlight: 0, delayed: 0 },
        admissionQueue: { url: 'http://sqs/alpha-admission', visible: 0, inFlight: 0, delayed: 0 },
        oldestWork: { ageSeconds: 0, source: 'queue-empty' },
        batches: [],
        limits: { allowance: { starts: 80, intervalMs: 60_000 }, sloMinutes: 360 },
      },
    ],
    notes: [],
  };
}

/** A source whose every method is a mock; `leak` makes its answers carry the credentials, as a bug might. */
function fakeSource(leak = false) {
  const source = {
    description: 'stack PacedJobs-test (local)',
    jobs: jest.fn(async () => ['alpha', 'beta']),
    overview: jest.fn(async () => {
      const o = overview();
      if (leak)
        o.notes.push(
          `credentials ${ACCESS_KEY} / ${SECRET_KEY} / ${SESSION_TOKEN}`,
          'another key ASIAZZZZZZZZZZZZZZZZ',
        );
      return o;
    }),
    charts: jest.fn(async (job: string) => ({
      job,
      window: { fromMs: 0, toMs: 60_000 },
      charts: [
        {
          id: `${job}:starts`,
          title: 'Starts',
          unit: 'starts per 1 min',
          x: [0],
          lines: [{ label: 'starts', values: [3] }],
        },
      ],
    })),
    dlqPeek: jest.fn(async (job: string) => ({
      ok: true as const,
      command: 'dlq peek' as const,
      warning: 'peeking receives each message',
      jobs: [{ job, dlqUrl: 'http://sqs/alpha-dlq', messages: [] as PeekedMessage[] }],
    })),
    operation: jest.fn(async (operationId: string) => {
      if (leak) throw new Error(`the SDK said: invalid signature for ${ACCESS_KEY} with ${SECRET_KEY}`);
      return { ok: true as const, command: 'op' as const, operationId, found: false, jobs: [] };
    }),
    pause: jest.fn(async () => steps('pause')),
    resume: jest.fn(async () => steps('resume')),
    redrive: jest.fn(async () => ({
      ok: true as const,
      command: 'redrive' as const,
      dryRun: false,
      rate: 10,
      jobs: [],
    })),
    catchUp: jest.fn(async (job: string) => {
      throw new UsageError(`--from 2026-02-30 is not a real date (job ${job})`);
    }),
  };
  return source satisfies ConsoleSource;
}

describe('Function: startConsoleServer', () => {
  let server: ConsoleServer;
  let source: ReturnType<typeof fakeSource>;
  const start = async (options: Partial<ConsoleServerOptions> = {}, leak = false) => {
    source = fakeSource(leak);
    server = await startConsoleServer({
      source,
      changesAllowed: true,
      token: TOKEN,
      redact: [SECRET_KEY, ACCESS_KEY, SESSION_TOKEN],
      ...options,
    });
    return server;
  };
  const api = (path: string, headers: Record<string, string> = {}) =>
    send(server.port, { path, headers: { 'x-console-token': TOKEN, ...headers } });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    send(server.port, {
      method: 'POST',
      path,
      body: JSON.stringify(body),
      headers: {
        'content-type': 'application/json',
        'x-console-token': TOKEN,
        origin: `http://127.0.0.1:${server.port}`,
        ...headers,
      },
    });
  const actions = () => [source.pause, source.resume, source.redrive, source.catchUp, source.dlqPeek];

  afterEach(async () => {
    await server?.close();
  });

  describe('what it serves', () => {
    it('listens on 127.0.0.1 and gives a URL without the token and one with it', async () => {
      await start();

      expect(server.url).toBe(`http://127.0.0.1:${server.port}/`);
      expect(server.tokenUrl).toBe(`http://127.0.0.1:${server.port}/?token=${TOKEN}`);
      const external = Object.values(networkInterfaces())
        .flat()
        .find((i) => i && i.family === 'IPv4' && !i.internal);
      if (external) {
        // Any other address of this machine is refused: nothing off the machine can reach the console.
        await expect(
          new Promise((resolve, reject) =>
            httpRequest({ host: external.address, port: server.port, path: '/' }, resolve).on('error', reject).end(),
          ),
        ).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      }
    });

    it('serves the page with the token in its meta, a strict CSP, nosniff and no-store, when the URL carries the token', async () => {
      await start();

      const page = await send(server.port, { path: `/?token=${TOKEN}` });

      expect(page.status).toBe(200);
      expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(page.body).toContain(`<meta name="console-token" content="${TOKEN}">`);
      expect(page.headers['content-security-policy']).toBe(CONTENT_SECURITY_POLICY);
      expect(CONTENT_SECURITY_POLICY).toContain("default-src 'self'");
      expect(CONTENT_SECURITY_POLICY).toContain("script-src 'self'");
      expect(CONTENT_SECURITY_POLICY).not.toContain('unsafe-inline');
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(page.headers['cache-control']).toBe('no-store');
      expect(page.headers['referrer-policy']).toBe('no-referrer');
      expect(page.headers['x-frame-options']).toBe('DENY');
      // No inline script: every <script> loads a file of the console's own.
      expect([...page.body.matchAll(/<script([^>]*)>/g)].map((m) => m[1].trim())).toEqual([
        'src="/assets/uPlot.iife.min.js" defer',
        'type="module" src="/assets/charts.js"',
        'type="module" src="/assets/app.js"',
      ]);
      expect(page.body).not.toMatch(/https?:\/\/(?!127\.0\.0\.1)/);
    });

    it('serves the bare page (no token) without one in the URL, and refuses a wrong one', async () => {
      await start();

      const bare = await send(server.port, { path: '/' });
      const wrong = await send(server.port, { path: '/?token=not-the-token-at-all-000000' });

      expect(bare.status).toBe(200);
      expect(bare.body).toContain('<meta name="console-token" content="">');
      expect(bare.body).not.toContain(TOKEN);
      expect(wrong.status).toBe(403);
      expect(wrong.body).not.toContain(TOKEN);
    });

    it("serves uPlot, the charts renderer and the page's own code and styles, from the project", async () => {
      await start();

      for (const [path, type] of [
        ['/assets/uPlot.iife.min.js', 'text/javascript; charset=utf-8'],
        ['/assets/uPlot.min.css', 'text/css; charset=utf-8'],
        ['/assets/charts.js', 'text/javascript; charset=utf-8'],
        ['/assets/charts.css', 'text/css; charset=utf-8'],
        ['/assets/app.js', 'text/javascript; charset=utf-8'],
        ['/assets/app.css', 'text/css; charset=utf-8'],
      ]) {
        const answer = await send(server.port, { path });
        expect([
          path,
          answer.status,
          answer.headers['content-type'],
          answer.headers['x-content-type-options'],
          answer.headers['cache-control'],
        ]).toEqual([path, 200, type, 'nosniff', 'no-store']);
        expect(answer.body.length).toBeGreaterThan(100);
      }
      expect((await send(server.port, { path: '/assets/uPlot.iife.min.js' })).body).toContain('uPlot');
      expect((await send(server.port, { path: '/assets/charts.js' })).body).toContain('window.PacedCharts');
      expect((await send(server.port, { path: '/assets/nope.js' })).status).toBe(404);
    });

    it('answers the API with the token: config, overview, charts and an operation', async () => {
      await start();

      const config = await api('/api/config');
      const view = await api('/api/overview?batches=3');
      const charts = await api('/api/charts?job=beta&minutes=30');
      const op = await api('/api/operation?id=reconcile%3Aacme%3Ap1%3A2026-03-10&job=alpha');

      expect(config.status).toBe(200);
      expect(config.json()).toMatchObject({
        description: 'stack PacedJobs-test (local)',
        jobs: ['alpha', 'beta'],
        changesAllowed: true,
        refresh: { overviewMs: 5000, chartsMs: 3000 },
      });
      expect(config.headers['cache-control']).toBe('no-store');
      expect(config.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(view.json()).toEqual(overview());
      expect(source.overview).toHaveBeenCalledWith({ batches: 3 });
      expect(charts.json()).toMatchObject({ job: 'beta', charts: [{ id: 'beta:starts' }] });
      expect(source.charts).toHaveBeenCalledWith('beta', { minutes: 30 });
      expect(op.status).toBe(200);
      expect(source.operation).toHaveBeenCalledWith('reconcile:acme:p1:2026-03-10', { job: 'alpha' });
    });

    it('runs a change with the token and its own Origin, calling the source once', async () => {
      await start();

      const paused = await post('/api/pause', { job: 'alpha' });
      const redriven = await post('/api/redrive', { job: 'beta', rate: 5 });

      expect(paused.status).toBe(200);
      expect(paused.json()).toEqual(steps('pause'));
      expect(source.pause.mock.calls).toEqual([['alpha']]);
      expect(redriven.status).toBe(200);
      expect(source.redrive.mock.calls).toEqual([['beta', { rate: 5 }]]);
    });
  });

  describe('what it refuses', () => {
    it('refuses a change without the token, or with a wrong one, and never calls the source', async () => {
      await start();

      const none = await send(server.port, {
        method: 'POST',
        path: '/api/pause',
        body: '{"job":"alpha"}',
        headers: { 'content-type': 'application/json', origin: `http://127.0.0.1:${server.port}` },
      });
      const wrong = await post('/api/pause', { job: 'alpha' }, { 'x-console-token': `${TOKEN}x` });
      const short = await post('/api/resume', { job: 'alpha' }, { 'x-console-token': TOKEN.slice(0, 10) });

      for (const answer of [none, wrong, short]) {
        expect(answer.status).toBe(403);
        expect(answer.json()).toEqual({
          ok: false,
          error: {
            name: 'ConsoleForbiddenError',
            message: "the console's token is missing or wrong: open the URL the terminal printed",
          },
        });
      }
      for (const action of actions()) expect(action).not.toHaveBeenCalled();
    });

    it('refuses a read of the API without the token', async () => {
      await start();

      const answer = await send(server.port, { path: '/api/overview' });

      expect(answer.status).toBe(403);
      expect(source.overview).not.toHaveBeenCalled();
    });

    it('refuses any request whose Host is not 127.0.0.1 or localhost on its port (DNS rebinding)', async () => {
      await start();
      const port = server.port;

      for (const host of [
        'evil.example',
        `evil.example:${port}`,
        `127.0.0.1:${port + 1}`,
        `localhost.evil.example:${port}`,
        `[::1]:${port}`,
      ]) {
        for (const path of ['/', `/?token=${TOKEN}`, '/assets/app.js', '/api/overview']) {
          const answer = await send(port, { path, headers: { host, 'x-console-token': TOKEN } });
          expect([host, path, answer.status]).toEqual([host, path, 403]);
          expect(answer.body).not.toContain(TOKEN);
        }
        const change = await post('/api/pause', { job: 'alpha' }, { host });
        expect([host, change.status]).toEqual([host, 403]);
      }
      // No Host at all (HTTP/1.0) is not this console's either.
      const bare = await new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => socket.end('GET / HTTP/1.0\r\n\r\n'));
        let text = '';
        socket.on('data', (c: Buffer) => (text += c.toString('utf8')));
        socket.on('end', () => resolve(text));
        socket.on('error', reject);
      });
      expect(bare).toMatch(/^HTTP\/1\.1 403 /);
      expect((await send(port, { path: '/', headers: { host: `localhost:${port}` } })).status).toBe(200);
      expect((await send(port, { path: '/', headers: { host: `LOCALHOST:${port}` } })).status).toBe(200);
      expect(source.overview).not.toHaveBeenCalled();
      expect(source.pause).not.toHaveBeenCalled();
    });

    it('refuses a request from a foreign Origin, even with the token', async () => {
      await start();

      for (const origin of [
        'http://evil.example',
        `http://127.0.0.1:${server.port + 1}`,
        `https://127.0.0.1:${server.port}`,
        'null',
      ]) {
        const change = await post('/api/pause', { job: 'alpha' }, { origin });
        const read = await api('/api/overview', { origin });
        expect([origin, change.status, read.status]).toEqual([origin, 403, 403]);
      }
      expect((await post('/api/pause', { job: 'alpha' }, { origin: `http://localhost:${server.port}` })).status).toBe(
        200,
      );
      expect(source.pause).toHaveBeenCalledTimes(1);
      expect(source.overview).not.toHaveBeenCalled();
    });

    it('refuses an API request the browser marks as cross-site or same-site', async () => {
      await start();

      const cross = await api('/api/overview', { 'sec-fetch-site': 'cross-site' });
      const sameSite = await post('/api/pause', { job: 'alpha' }, { 'sec-fetch-site': 'same-site' });
      const own = await api('/api/overview', { 'sec-fetch-site': 'same-origin' });

      expect([cross.status, sameSite.status, own.status]).toEqual([403, 403, 200]);
      expect(source.pause).not.toHaveBeenCalled();
    });

    it('refuses a change sent as anything but JSON (a form post), before reading it', async () => {
      await start();

      const form = await send(server.port, {
        method: 'POST',
        path: '/api/pause',
        body: 'job=alpha',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-console-token': TOKEN },
      });
      const big = await post('/api/pause', { job: 'alpha', pad: 'x'.repeat(20_000) });

      expect(form.status).toBe(415);
      expect(big.status).toBe(413);
      expect(source.pause).not.toHaveBeenCalled();
    });

    it('with changes off: refuses pause, resume, redrive and catch-up before calling the source, and still peeks', async () => {
      await start({
        changesAllowed: false,
        changesNote: 'PacedJobs-prod is a deployed environment: restart with --allow-changes',
      });

      const config = await api('/api/config');
      const refused = await Promise.all([
        post('/api/pause', { job: 'alpha' }),
        post('/api/resume', { job: 'alpha' }),
        post('/api/redrive', { job: 'alpha' }),
        post('/api/catch-up', { job: 'alpha', from: '2026-03-01', to: '2026-03-02' }),
      ]);
      const peek = await post('/api/dlq-peek', { job: 'alpha', max: 5 });

      expect(config.json()).toMatchObject({
        changesAllowed: false,
        changesNote: 'PacedJobs-prod is a deployed environment: restart with --allow-changes',
      });
      expect(refused.map((r) => r.status)).toEqual([403, 403, 403, 403]);
      expect(refused[0].json()).toEqual({
        ok: false,
        error: {
          name: 'ConsoleForbiddenError',
          message: 'pause is off: PacedJobs-prod is a deployed environment: restart with --allow-changes',
        },
      });
      for (const action of [source.pause, source.resume, source.redrive, source.catchUp])
        expect(action).not.toHaveBeenCalled();
      expect(peek.status).toBe(200);
      expect(source.dlqPeek.mock.calls).toEqual([['alpha', { max: 5 }]]);
    });

    it('checks every parameter before the source is called', async () => {
      await start();

      const unknown = await post('/api/pause', { job: 'gamma' });
      const noJob = await post('/api/resume', {});
      const badDate = await post('/api/catch-up', { job: 'alpha', from: '10/03/2026', to: '2026-03-10' });
      const badRate = await post('/api/redrive', { job: 'alpha', rate: 501 });
      const badMinutes = await api('/api/charts?job=alpha&minutes=0');
      const noId = await api('/api/operation?id=');
      const get = await send(server.port, { path: '/api/pause', headers: { 'x-console-token': TOKEN } });

      expect(unknown.status).toBe(404);
      expect(unknown.json()).toEqual({
        ok: false,
        error: { name: 'ConsoleError', message: 'unknown job "gamma"; the stack has: alpha, beta' },
      });
      expect([noJob.status, badDate.status, badRate.status, badMinutes.status, noId.status, get.status]).toEqual([
        400, 400, 400, 400, 400, 405,
      ]);
      expect(badDate.json()).toEqual({
        ok: false,
        error: { name: 'ConsoleError', message: 'from must be a date YYYY-MM-DD, got "10/03/2026"' },
      });
      for (const action of actions()) expect(action).not.toHaveBeenCalled();
      expect(source.charts).not.toHaveBeenCalled();
      expect(source.operation).not.toHaveBeenCalled();
    });

    it('answers data with its control, bidi and invisible characters escaped, in its values and in errors', async () => {
      await start();
      const message = {
        messageId: 'm-1',
        receiveCount: 1,
        failureReason: 'refused "x\u202egnp.exe"\u2028forged',
        body: '{"k":"a\u0085\u200bb"}',
      };
      source.dlqPeek.mockResolvedValueOnce({
        ok: true,
        command: 'dlq peek',
        warning: 'w',
        jobs: [{ job: 'alpha', dlqUrl: 'http://sqs/alpha-dlq', messages: [message] }],
      });
      source.overview.mockImplementationOnce(async () => ({
        ...overview(),
        notes: ['tenant "\u2066evil\u2069" has no limit'],
      }));
      source.catchUp.mockRejectedValueOnce(new UsageError('no such tenant "\u202eab"'));

      const peek = await post('/api/dlq-peek', { job: 'alpha', max: 5 });
      const status = await api('/api/overview');
      const refused = await post('/api/catch-up', { job: 'alpha', from: '2026-03-01', to: '2026-03-02' });

      expect((peek.json() as { jobs: { messages: unknown[] }[] }).jobs[0].messages[0]).toEqual({
        messageId: 'm-1',
        receiveCount: 1,
        failureReason: 'refused "x\\u202egnp.exe"\\u2028forged',
        body: '{"k":"a\\u0085\\u200bb"}',
      });
      expect(status.json().notes).toEqual(['tenant "\\u2066evil\\u2069" has no limit']);
      expect(refused.json()).toEqual({
        ok: false,
        error: { name: 'UsageError', message: 'no such tenant "\\u202eab"' },
      });
    });

    it("answers a command's own refusal with its name and message", async () => {
      await start();

      const answer = await post('/api/catch-up', { job: 'alpha', from: '2026-03-01', to: '2026-03-02' });

      expect(answer.status).toBe(400);
      expect(answer.json()).toEqual({
        ok: false,
        error: { name: 'UsageError', message: '--from 2026-02-30 is not a real date (job alpha)' },
      });
    });
  });

  describe('credentials', () => {
    it('never sends a credential: not in the page, the assets or any API answer, even when the source leaks one', async () => {
      await start({}, true);
      const answers = [
        await send(server.port, { path: `/?token=${TOKEN}` }),
        await send(server.port, { path: '/' }),
        ...(await Promise.all(
          [
            '/assets/uPlot.iife.min.js',
            '/assets/uPlot.min.css',
            '/assets/charts.js',
            '/assets/charts.css',
            '/assets/app.js',
            '/assets/app.css',
          ].map((path) => send(server.port, { path })),
        )),
        await api('/api/config'),
        await api('/api/overview'),
        await api('/api/charts?job=alpha'),
        await api('/api/operation?id=op-1'),
        await post('/api/pause', { job: 'alpha' }),
        await post('/api/dlq-peek', { job: 'alpha' }),
        await post('/api/catch-up', { job: 'alpha', from: '2026-03-01', to: '2026-03-01' }),
        await send(server.port, { path: '/api/overview' }),
        await send(server.port, { path: '/', headers: { host: 'evil.example' } }),
      ];

      for (const answer of answers) {
        const text = `${JSON.stringify(answer.headers)}\n${answer.body}`;
        for (const secret of [SECRET_KEY, ACCESS_KEY, SESSION_TOKEN, 'ASIAZZZZZZZZZZZZZZZZ'])
          expect(text).not.toContain(secret);
      }
      // What leaked is replaced, and the rest of the answer is kept.
      const leaked = await api('/api/overview');
      expect((leaked.json().notes as string[]).slice(-2)).toEqual([
        'credentials [redacted] / [redacted] / [redacted]',
        'another key [redacted]',
      ]);
      const failed = await api('/api/operation?id=op-1');
      expect(failed.status).toBe(500);
      expect(failed.json()).toEqual({
        ok: false,
        error: { name: 'Error', message: 'the SDK said: invalid signature for [redacted] with [redacted]' },
      });
    });
  });
});

describe('Function: tokensEqual', () => {
  it('is true only for the same token', () => {
    expect(tokensEqual(TOKEN, TOKEN)).toBe(true);
    expect(tokensEqual(`${TOKEN}x`, TOKEN)).toBe(false);
    expect(tokensEqual(TOKEN.slice(1), TOKEN)).toBe(false);
    expect(tokensEqual('', TOKEN)).toBe(false);
    expect(tokensEqual(undefined, TOKEN)).toBe(false);
  });
});

describe('Function: redactor', () => {
  it('replaces every listed secret and anything shaped like an access key ID, and leaves short strings alone', () => {
    const redact = redactor(['S3RVER', 'abc', SECRET_KEY]);

    expect(redact(`key S3RVER/S3RVER, ${SECRET_KEY}, AKIA0000000000000000, abc`)).toBe(
      'key [redacted]/[redacted], [redacted], [redacted], abc',
    );
  });
});

describe('Function: foreignRequest', () => {
  it('passes its own Host and Origin on its port, by either name, in any case, and a request without an Origin', () => {
    expect(foreignRequest({ host: '127.0.0.1:4000' }, 4000)).toBeUndefined();
    expect(foreignRequest({ host: 'LOCALHOST:4000', origin: 'http://127.0.0.1:4000' }, 4000)).toBeUndefined();
    expect(foreignRequest({ host: 'localhost:4000', origin: 'HTTP://LOCALHOST:4000' }, 4000)).toBeUndefined();
  });

  it('refuses another name, another port, or a foreign Origin, naming what it saw', () => {
    expect(foreignRequest({ host: 'evil.test:4000' }, 4000)).toMatchObject({
      reason: 'host',
      message: 'Host "evil.test:4000" is not this console\'s',
    });
    expect(foreignRequest({ host: '127.0.0.1:4001' }, 4000)?.reason).toBe('host');
    expect(foreignRequest({}, 4000)).toMatchObject({ reason: 'host', message: 'Host "" is not this console\'s' });
    expect(foreignRequest({ host: '127.0.0.1:4000', origin: 'http://evil.test' }, 4000)).toMatchObject({
      reason: 'origin',
      message: 'Origin "http://evil.test" is not this console\'s',
    });
  });
});

describe('Function: unauthorizedApiRequest', () => {
  it("passes the console's token from its own page, or with no fetch metadata", () => {
    expect(
      unauthorizedApiRequest({ 'x-console-token': TOKEN, 'sec-fetch-site': 'same-origin' }, TOKEN),
    ).toBeUndefined();
    expect(unauthorizedApiRequest({ 'x-console-token': TOKEN }, TOKEN)).toBeUndefined();
  });

  it('refuses another site before it looks at the token, and a missing or wrong token', () => {
    expect(unauthorizedApiRequest({ 'x-console-token': TOKEN, 'sec-fetch-site': 'cross-site' }, TOKEN)).toMatchObject({
      reason: 'fetch-site',
      message: 'a cross-site request',
    });
    expect(unauthorizedApiRequest({ 'sec-fetch-site': 'same-site' }, TOKEN)?.reason).toBe('fetch-site');
    expect(unauthorizedApiRequest({}, TOKEN)?.reason).toBe('token');
    expect(unauthorizedApiRequest({ 'x-console-token': `${TOKEN}x` }, TOKEN)?.reason).toBe('token');
  });
});
