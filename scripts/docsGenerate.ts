// `npm run docs:generate`: writes what the guides hold that the code decides. docs/configuration.md whole, from the
// schema (configReference.ts), and each flags table of README.md and docs/*.md, from the commands' programs
// (docsFlags.ts). Run it after changing the schema or a command's flags; the docs tests fail until it has run.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CONFIG_DOC, configurationReference } from './configReference';
import { commandsByWords, documentedCommands, flagMarkers, markerProblems, withFlagTables } from './docsFlags';
import { guideFiles, ROOT } from './markdown';

/** Writes the generated parts; returns what it wrote, and the problems left (a command without its marker). */
export function generateDocs(root = ROOT): { written: string[]; problems: string[] } {
  const { text, problems } = configurationReference();
  if (problems.length > 0) {
    throw new Error(
      `lib/config/schema.ts's documentation is incomplete:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
  const written: string[] = [];
  const configFile = join(root, CONFIG_DOC);
  if (!existsSync(configFile) || readFileSync(configFile, 'utf8') !== text) {
    mkdirSync(dirname(configFile), { recursive: true });
    writeFileSync(configFile, text);
    written.push(CONFIG_DOC);
  }
  const commands = documentedCommands(root);
  const byWords = commandsByWords(commands);
  const files = guideFiles(root);
  for (const file of files) {
    const path = join(root, file);
    const before = readFileSync(path, 'utf8');
    const after = withFlagTables(before, file, byWords);
    if (after !== before) {
      writeFileSync(path, after);
      written.push(file);
    }
  }
  return { written, problems: markerProblems(flagMarkers(root, files), commands) };
}

if (require.main === module) {
  try {
    const { written, problems } = generateDocs();
    console.log(written.length > 0 ? `wrote ${written.join(', ')}` : 'the generated docs were up to date');
    if (problems.length > 0) {
      console.error(`still to do by hand:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
      process.exitCode = 1;
    }
  } catch (error) {
    console.error(`docs:generate failed: ${(error as Error).message}`);
    process.exitCode = 1;
  }
}
