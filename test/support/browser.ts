// The browser tests' one way to start a browser: Debian's chromium (scripts/ensure-browser.mjs installs it before
// `npm test`), driven by playwright-core, with a fresh profile and no background networking (this machine has no
// network, and an operator's may not either). Never a downloaded browser.
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** A headless chromium with a profile of its own, removed on close. Fails naming the install step when it is missing. */
export async function launchBrowser(): Promise<Browser> {
  try {
    accessSync(CHROMIUM_PATH, constants.X_OK);
  } catch {
    throw new Error(
      `no chromium at ${CHROMIUM_PATH}: run \`node scripts/ensure-browser.mjs\` (npm test does it first) or \`sudo apt-get install -y chromium\``,
    );
  }
  const profile = mkdtempSync(join(tmpdir(), 'paced-jobs-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: FLAGS,
  });
  return {
    context,
    async close() {
      await context.close().catch(() => undefined);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
