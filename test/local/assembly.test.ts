import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureStack, findStack, newestSourceMtime } from '../../local/assembly';

describe('Function: findStack', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'assembly-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const writeAssembly = () => {
    mkdirSync(join(dir, 'cdk.out'));
    writeFileSync(
      join(dir, 'cdk.out', 'manifest.json'),
      JSON.stringify({ artifacts: { 'PacedJobs-dev': { type: 'aws:cloudformation:stack', properties: { templateFile: 'PacedJobs-dev.template.json' } } } }),
    );
    writeFileSync(join(dir, 'cdk.out', 'PacedJobs-dev.template.json'), '{"Resources":{}}');
  };

  it('picks the environment stack from the manifest', () => {
    writeAssembly();
    expect(findStack(join(dir, 'cdk.out'), 'dev')).toEqual({
      stackName: 'PacedJobs-dev',
      templateFile: join(dir, 'cdk.out', 'PacedJobs-dev.template.json'),
      assemblyDir: join(dir, 'cdk.out'),
    });
    expect(findStack(join(dir, 'cdk.out'), 'prod')).toBeUndefined();
  });

  it('uses an up-to-date assembly without synthesizing', () => {
    writeAssembly();
    mkdirSync(join(dir, 'lib'));
    writeFileSync(join(dir, 'lib', 'stack.ts'), '');
    const old = new Date(Date.now() - 60_000);
    utimesSync(join(dir, 'lib', 'stack.ts'), old, old);
    const logs: string[] = [];
    expect(ensureStack({ env: 'dev', assemblyDir: 'cdk.out', cwd: dir, log: (l) => logs.push(l) }).stackName).toBe('PacedJobs-dev');
    expect(logs).toEqual([]);
    expect(Math.abs(newestSourceMtime(dir) - old.getTime())).toBeLessThan(1000);
  });

  it('warns, without synthesizing, when a source changed after the assembly was written', () => {
    writeAssembly();
    mkdirSync(join(dir, 'lambda'));
    writeFileSync(join(dir, 'lambda', 'handler.ts'), '');
    const old = new Date(Date.now() - 60_000);
    utimesSync(join(dir, 'cdk.out', 'PacedJobs-dev.template.json'), old, old);
    const logs: string[] = [];
    ensureStack({ env: 'dev', assemblyDir: 'cdk.out', cwd: dir, log: (l) => logs.push(l) });
    expect(logs).toEqual([`warning: ${join(dir, 'cdk.out', 'PacedJobs-dev.template.json')} is older than the sources in bin, lib, lambda; pass --synth to rebuild it`]);
  });
});
