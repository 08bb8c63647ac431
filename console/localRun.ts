// What `npm start` shows beside its run (local/run.ts's RunViews): the web console of a serving session, on the
// operator CLI's own code against the stack's endpoints file, and a demo run's charts as one HTML file. It sits above
// the local runtime, so that local/ imports nothing of the console or the operator CLI.
import { batchReconciles } from '../lambda/core/ledgerContract';
import type { LocalConsole, RunViews } from '../local/run';
import type { RunReport } from '../local/report';
import type { LocalSession } from '../local/session';
import { createClients } from '../ops/clients';
import { LocalEndpointsSource } from '../ops/resources';
import { jobCharts, type JobChartInput } from './charts';
import { consoleIo, OpsConsoleSource, queueNameOf } from './opsSource';
import { writeHtmlReport } from './report';
import { startConsoleServer } from './server';

/** Both views, as `npm start` and `paced-jobs start` show them. */
export const localRunViews: Required<RunViews> = { startConsole: startLocalConsole, writeCharts: writeRunCharts };

/**
 * Starts the console with changes on (this is the operator's own local stack), on the operator CLI's code against
 * the endpoints file, and with the charts from the session's own samples (in process: no CloudWatch round trip).
 */
async function startLocalConsole(
  session: LocalSession,
  port: number | undefined,
  say: (line: string) => void,
): Promise<LocalConsole> {
  const openedAt = Date.now();
  let resolveSource!: (source: OpsConsoleSource) => void;
  let rejectSource!: (error: unknown) => void;
  const source = new Promise<OpsConsoleSource>((resolve, reject) => {
    resolveSource = resolve;
    rejectSource = reject;
  });
  let opened: OpsConsoleSource | undefined;
  const { credentials } = session.stack.clientConfig('sqs');
  const server = await startConsoleServer({
    source,
    changesAllowed: true,
    port,
    redact: [credentials.accessKeyId, credentials.secretAccessKey],
    log: say,
  });
  return {
    url: server.url,
    tokenUrl: server.tokenUrl,
    load(endpointsFile) {
      new LocalEndpointsSource(endpointsFile).load().then((resources) => {
        opened = new OpsConsoleSource({
          ctx: {
            resources,
            clients: createClients(resources.clients),
            io: consoleIo((line) => say(`[console] ${line}`)),
          },
          samples: () => session.metrics.samples(),
          since: openedAt,
          // The local mappings settle within a poll or two of the emulated event source.
          mappingWait: { timeoutMs: 30_000, pollMs: 200 },
        });
        resolveSource(opened);
      }, rejectSource);
    },
    async close() {
      await server.close();
      await opened?.close();
    },
  };
}

/**
 * `.local/report.html`: per job, the run's charts (starts per window against the allowance, outcomes, job age, queue
 * depth) over the session's samples, with the report's figures beside them. Returns the file's path.
 */
async function writeRunCharts(
  session: LocalSession,
  report: RunReport,
  file: string,
  run: { started: number; businessDate: string },
): Promise<string> {
  const window = { fromMs: run.started, toMs: Date.now() };
  const samples = session.metrics.samples();
  const sections = [];
  for (const job of session.jobs.values()) {
    const figures = report.jobs[job.name];
    const batches = await session.ledgerBatches(job.name);
    const unreconciled = batches.filter(
      (b) =>
        !batchReconciles({
          ...b.figures,
          admission: typeof b.item.admission === 'string' ? b.item.admission : undefined,
        }),
    ).length;
    const input: JobChartInput = {
      job: job.name,
      allowance: {
        starts: job.settings.rateLimit.startsPerInterval,
        intervalMs: job.settings.rateLimit.intervalSeconds * 1000,
      },
      ...(job.settings.slo ? { sloMinutes: job.settings.slo.completeWithinMinutes } : {}),
      ...(job.queueUrl ? { queueName: queueNameOf(job.queueUrl) } : {}),
      ...(job.dlqUrl ? { dlqName: queueNameOf(job.dlqUrl) } : {}),
    };
    const facts: [string, string][] = figures
      ? [
          ['discovered', String(figures.discovered)],
          ['applied', String(figures.completed)],
          ['duplicates suppressed', String(figures.duplicatesSuppressed)],
          ['deferred', String(figures.deferred)],
          ['429s', String(figures.throttled)],
          [
            'most starts in any window',
            `${figures.maxStartsPerWindow} (allowance ${figures.rateLimitPerWindow} per ${figures.windowSeconds} s)`,
          ],
          ['DLQ', String(figures.dlq)],
          [
            'reconciles',
            batches.length === 0
              ? 'no batch'
              : unreconciled === 0
                ? `yes (${batches.length} batch${batches.length === 1 ? '' : 'es'})`
                : `NO (${unreconciled} of ${batches.length} batches)`,
          ],
        ]
      : [];
    sections.push({ heading: job.name, charts: jobCharts(samples, input, window), facts });
  }
  return writeHtmlReport(file, {
    title: `npm start: ${report.env}, business date ${run.businessDate}`,
    subtitle: `${report.ok ? 'every check passed' : 'a check FAILED (see the terminal)'}; the run ${report.settled ? 'settled' : 'did not settle'} in ${(report.durationMs / 1000).toFixed(1)} s`,
    sections,
  });
}
