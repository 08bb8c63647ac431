#!/usr/bin/env node
// `npm test`'s first step (package.json "pretest"): the browser tests drive Debian's chromium through playwright-core,
// and a fresh machine does not have it. Installs it with apt-get when it is missing and this process may (root, apt-get
// present); otherwise fails naming the command to run. Never downloads a browser from anywhere else.
import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';

const path = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

function present() {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function fail(why) {
  console.error(
    `ensure-browser: ${why}\n` +
      `The console's browser tests need Debian's chromium at ${path}. Install it with:\n` +
      '  sudo apt-get update && sudo apt-get install -y chromium\n' +
      '(or set CHROMIUM_PATH to a Chromium binary), then run npm test again.',
  );
  process.exit(1);
}

if (present()) process.exit(0);
if (process.env.CHROMIUM_PATH) fail(`CHROMIUM_PATH is set to ${path}, which is not an executable file.`);
if (typeof process.getuid === 'function' && process.getuid() !== 0)
  fail('chromium is missing and this user is not root, so it cannot be installed here.');
if (spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).status !== 0)
  fail('chromium is missing and this machine has no apt-get.');

const install = () =>
  spawnSync('apt-get', ['install', '-y', 'chromium'], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
console.error('ensure-browser: installing Debian chromium for the browser tests (apt-get install -y chromium)');
if (install().status !== 0) {
  // A fresh machine may have no package lists yet.
  try {
    execFileSync('apt-get', ['update'], { stdio: ['ignore', 'inherit', 'inherit'] });
  } catch {
    fail('apt-get update failed.');
  }
  if (install().status !== 0) fail('apt-get install -y chromium failed.');
}
if (!present()) fail(`apt-get installed chromium but ${path} is still missing.`);
