// A team's CDK app as issue #35 describes it, for test/package/pack.e2e.test.ts: its cdk.json and tsconfig.json, and
// the stack and job exactly as docs/getting-started.md shows them (its two code blocks whose info
// string names a file under `app/`), so the guide's example is what the test installs, builds and runs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The job's name, as the guide's stack names it. */
export const JOB = 'usage-report';
/** Operations per run: one per account (`settings.accounts` in the guide's stack). */
export const ACCOUNTS = 30;

/** Every Markdown code block whose info string is `<language> app/<path>`, by that path. */
export function readmeAppFiles(readme: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const [, path, body] of readme.matchAll(/^```\w+ app\/(\S+)\n([\s\S]*?)^```$/gm)) files[path] = body;
  return files;
}

const fromReadme = readmeAppFiles(readFileSync(join(__dirname, '..', '..', 'docs', 'getting-started.md'), 'utf8'));

/** The app's files, as a team writes them following the guide. */
export const APP_FILES: Record<string, string> = {
  'cdk.json': `${JSON.stringify({ app: 'npx tsx bin/app.ts' }, null, 2)}\n`,
  'tsconfig.json': `${JSON.stringify(
    {
      // `types`: TypeScript 6 and later no longer include every @types package by default, and the stack uses Node's
      // path and __dirname (@types/node comes with the package).
      compilerOptions: {
        target: 'ES2022',
        module: 'node16',
        moduleResolution: 'node16',
        strict: true,
        skipLibCheck: true,
        noEmit: true,
        types: ['node'],
      },
      include: ['bin', 'jobs'],
    },
    null,
    2,
  )}\n`,
  ...fromReadme,
};
