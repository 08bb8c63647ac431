// `npm run ops`'s entry (package.json's script names this file): the CLI with its console, composed in cli/ops.ts.
// Once the script runs `tsx cli/ops.ts` this file can go; until then it is the one file of ops/ that reaches above it.
import { main } from '../cli/ops';

main();
