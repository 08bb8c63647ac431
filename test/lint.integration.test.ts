// The lint's layer and cycle rules (biome.jsonc) fail on what they forbid and pass what they allow: seeded files in a
// temporary copy of the project's layout, linted with the project's own config and biome. Integration tier: biome runs
// as a child process.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..');
const BIOME = require.resolve('@biomejs/biome/bin/biome');

interface Diagnostic {
  category: string;
  message: string;
  location: { path: string; start: { line: number } };
}

interface LintRun {
  status: number | null;
  diagnostics: Diagnostic[];
}

/** `biome lint` in `cwd`, on these paths (all of cwd when none), read through its JSON reporter. */
function lint(cwd: string, paths: string[] = ['.']): LintRun {
  const run = spawnSync(process.execPath, [BIOME, 'lint', '--reporter=json', '--max-diagnostics=none', ...paths], {
    cwd,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, BIOME_CONFIG_PATH: undefined, NO_COLOR: '1' },
  });
  if (run.error) throw run.error;
  const report = JSON.parse(run.stdout) as { diagnostics: Diagnostic[] };
  return { status: run.status, diagnostics: report.diagnostics };
}

// Each seeded file breaks one rule; the fragment is the start of that rule's message in biome.jsonc.
const VIOLATIONS: { file: string; text: string; rule: string; says: string }[] = [
  {
    file: 'local/seededUp.ts',
    text: "import { buildProgram } from '../ops/program';\nexport const up = buildProgram;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'local/ sits under the other tools',
  },
  {
    file: 'lambda/core/seededAdapter.ts',
    text: "import { dynamoClient } from '../adapters/clients';\nexport const client = dynamoClient;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'lambda/core imports no other layer',
  },
  {
    file: 'lambda/core/pacing/seededSdk.ts',
    text: "import { SQSClient } from '@aws-sdk/client-sqs';\nexport const sqs = SQSClient;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'lambda/core knows nothing of AWS',
  },
  {
    file: 'lambda/handlers/seededFixture.ts',
    text: "import { fixture } from '../jobs/seeded-job/local';\nexport const f = fixture;\n",
    rule: 'lint/style/noRestrictedImports',
    says: "the handlers never import a job's fixture",
  },
  {
    file: 'lambda/jobs/seeded-job/index.ts',
    text: "import { handler } from '../../handlers/producer';\nexport const job = handler;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'a job never imports the handlers',
  },
  {
    file: 'lambda/jobs/seeded-job/items.ts',
    text: "import { job } from '../other-job/index';\nexport const other = job;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'a job never imports another job',
  },
  {
    file: 'lambda/jobs/seeded-job/schema.ts',
    text: "import { z } from 'zod';\nexport const schema = z.string();\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'bundled code imports zod/mini',
  },
  {
    file: 'lambda/jobs/seeded-job/runner.ts',
    text: "import { runLocal } from '../../../local/run';\nexport const run = runLocal;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'a job never imports the local tools',
  },
  {
    file: 'lambda/jobs/seeded-job/test/seeded.ts',
    text: "import { job } from '../../other-job/index';\nexport const other = job;\n",
    rule: 'lint/style/noRestrictedImports',
    says: "a job's own tests import no other job",
  },
  {
    file: 'lib/seededLambda.ts',
    text: "import { defineJob } from '../lambda/core/job';\nexport const d = defineJob;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'lib imports from lambda/ only the pure contracts',
  },
  {
    file: 'local/seededJob.ts',
    text: "import { job } from '../lambda/jobs/seeded-job/index';\nexport const j = job;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'local/, chaos/ and bench/ import no job code',
  },
  {
    file: 'local/seededHandler.ts',
    text: "import { handler } from '../lambda/handlers/consumer';\nexport const h = handler;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'local/ and ops/ talk to the stack as a client would',
  },
  {
    file: 'local/iam/seededLocal.ts',
    text: "import { startSession } from '../session';\nexport const s = startSession;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'local/iam imports from local/ only',
  },
  {
    file: 'chaos/seededIam.ts',
    text: "import { authorizer } from '../local/iam/authorizer';\nexport const a = authorizer;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'the stack reaches local/iam through local/iamWiring.ts alone',
  },
  {
    file: 'ops/commands/seededConsole.ts',
    text: "import { startConsoleServer } from '../../console/server';\nexport const c = startConsoleServer;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'ops/ sits under console, chaos and bench',
  },
  {
    file: 'console/seededChaos.ts',
    text: "import { runChaos } from '../chaos/run';\nexport const r = runChaos;\n",
    rule: 'lint/style/noRestrictedImports',
    says: 'console/ sits under chaos and bench',
  },
  // Two modules importing each other: each import is part of the cycle.
  {
    file: 'ops/seededCycleA.ts',
    text: "import { b } from './seededCycleB';\nexport const a = () => b;\n",
    rule: 'lint/suspicious/noImportCycles',
    says: 'This import is part of a cycle',
  },
  {
    file: 'ops/seededCycleB.ts',
    text: "import { a } from './seededCycleA';\nexport const b = () => a;\n",
    rule: 'lint/suspicious/noImportCycles',
    says: 'This import is part of a cycle',
  },
];

// What the rules allow, one file each: none may draw a diagnostic.
const CLEAN: { file: string; text: string }[] = [
  {
    file: 'local/clean.ts',
    text: "import { escapeUnprintable } from '../lambda/core/message';\nexport const e = escapeUnprintable;\n",
  },
  { file: 'lib/clean.ts', text: "import { EnvVar } from '../lambda/core/constants';\nexport const v = EnvVar;\n" },
  {
    file: 'lambda/jobs/seeded-job/local.ts',
    text: [
      "import { z } from 'zod';",
      "import { putItems } from '../../../local/fixture';",
      "import { defineJob } from '../../job';",
      'export const fixture = [z, putItems, defineJob];\n',
    ].join('\n'),
  },
  {
    file: 'lambda/jobs/seeded-job/clean.ts',
    text: "import * as z from 'zod/mini';\nimport { defineJob } from '../../job';\nexport const c = [z, defineJob];\n",
  },
  {
    file: 'lambda/jobs/seeded-job/test/clean.ts',
    text: "import { startLocalRun } from '../../../../local/testing';\nexport const t = startLocalRun;\n",
  },
  {
    file: 'local/iam/clean.ts',
    text: "import { plan } from '../plan';\nimport { gateway } from './gateway';\nexport const i = [plan, gateway];\n",
  },
  { file: 'local/iamWiring.ts', text: "import { gateway } from './iam';\nexport const w = gateway;\n" },
  // A file beside ops/program.ts named after a layer above is not that layer.
  {
    file: 'ops/program.ts',
    text: "import { renderConsole } from './commands/console';\nexport const p = renderConsole;\n",
  },
  {
    file: 'console/clean.ts',
    text: "import { buildProgram } from '../ops/program';\nexport const c = buildProgram;\n",
  },
  {
    file: 'bench/clean.ts',
    text: "import { startConsoleServer } from '../console/server';\nexport const b = startConsoleServer;\n",
  },
];

describe('the lint (biome.jsonc)', () => {
  let dir: string;
  let all: LintRun;
  let clean: LintRun;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'paced-jobs-lint-'));
    copyFileSync(join(ROOT, 'biome.jsonc'), join(dir, 'biome.jsonc'));
    for (const { file, text } of [...VIOLATIONS, ...CLEAN]) {
      mkdirSync(dirname(join(dir, file)), { recursive: true });
      writeFileSync(join(dir, file), text);
    }
    all = lint(dir);
    clean = lint(
      dir,
      CLEAN.map((c) => c.file),
    );
  }, 240_000);

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('fails on the seeded violations', () => {
    expect(all.status).not.toBe(0);
  });

  it.each(VIOLATIONS.map((v) => [v.file, v]))('names %s with its rule and reason', (_file, v) => {
    const found = all.diagnostics.filter((d) => d.location.path === v.file);
    expect(found.map((d) => [d.category, d.message.slice(0, v.says.length)])).toEqual([[v.rule, v.says]]);
  });

  it('passes the files that import only what their layer allows', () => {
    const cleanFiles = new Set(CLEAN.map((c) => c.file));
    expect(all.diagnostics.filter((d) => cleanFiles.has(d.location.path))).toEqual([]);
    expect(clean.diagnostics).toEqual([]);
    expect(clean.status).toBe(0);
  });
});
