// `npm pack` / `npm publish` (package.json prepack): builds dist/ from a clean slate: the TypeScript the package ships,
// compiled with declarations (tsconfig.build.json), and the files the compiled code reads beside itself, which tsc does
// not copy: the console's web page and the scaffold's templates. Runs in this repository only (its devDependencies).
import { cpSync, rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dist = join(root, 'dist');
/** Folders of non-TypeScript files the shipped code reads by path (console/assets.ts, scaffold/templates.ts). */
export const ASSET_FOLDERS = ['console/web', 'scaffold/templates'];

rmSync(dist, { recursive: true, force: true });
const tsc = spawnSync(
  process.execPath,
  [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.build.json')],
  {
    cwd: root,
    stdio: 'inherit',
  },
);
if (tsc.status !== 0) {
  process.stderr.write(`prepack: tsc -p tsconfig.build.json failed (exit ${tsc.status ?? tsc.signal})\n`);
  process.exit(1);
}
for (const folder of ASSET_FOLDERS) cpSync(join(root, folder), join(dist, folder), { recursive: true });
