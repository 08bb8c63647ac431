// The invalid-config corpus (test/corpus/config.json): every rule of lib/config/schema.ts fails with one exact message,
// and config the schema lets through but the stack cannot build is refused by the constructs before anything is made.
import { environments } from '../../../lib/config/environments';
import { ConfigError, loadEnvironment, parseEnvironment } from '../../../lib/config/load';
import { InvalidPropsError } from '../../../lib/props-error';
import { PacedJobsStack } from '../../../lib/stack';
import { applyChanges, configCases, stackConfigCases, type ConfigCase } from '../../corpus/loadCorpus';
import { testApp } from '../cdkContext';

const cases = configCases();

describe('Function: parseEnvironment', () => {
  it('starts every case from an environment that is valid as it stands', () => {
    for (const base of new Set(cases.map((c) => c.base))) expect(() => parseEnvironment(base, environments[base])).not.toThrow();
  });

  it.each(cases.map((c) => [c.name, c] as [string, ConfigCase]))('rejects %s with the exact message naming the key', (_name, c) => {
    const input = applyChanges(environments[c.base], c.changes);
    let thrown: unknown;
    try {
      parseEnvironment('corpus', input);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    // `{appResources.tables}` in a case stands for the environment's table keys, which grow with the jobs a user adds.
    const expected = c.expect.replace('{appResources.tables}', Object.keys((input as { appResources?: { tables?: object } }).appResources?.tables ?? {}).join(', '));
    expect((thrown as ConfigError).problems).toEqual([expected]);
    expect((thrown as ConfigError).message).toBe(`Invalid configuration for environment "corpus":\n  - ${expected}`);
  });

  // Problems come in schema order (appResources before jobs), whatever order the changes were made in.
  it('reports every problem of a config that breaks several rules at once, in one error', () => {
    const picked = ['table name with spaces', 'cron with 5 fields', 'rate limit starts zero'].map((name) => cases.find((c) => c.name === name) as ConfigCase);
    const input = applyChanges(environments.dev, picked.flatMap((c) => c.changes));
    expect(() => parseEnvironment('corpus', input)).toThrow(
      new ConfigError(`Invalid configuration for environment "corpus":\n${picked.map((c) => `  - ${c.expect}`).join('\n')}`),
    );
  });
});

describe('Function: loadEnvironment', () => {
  it.each([
    ['an unknown name', 'qa', 'Unknown environment "qa". Valid environments: dev, staging, prod.'],
    ['a name that is an Object prototype key', 'constructor', 'Unknown environment "constructor". Valid environments: dev, staging, prod.'],
    ['an empty name', '', 'No environment chosen. Pass -c env=<name>; valid environments: dev, staging, prod.'],
    ['no name', undefined, 'No environment chosen. Pass -c env=<name>; valid environments: dev, staging, prod.'],
  ])('rejects %s with the exact message', (_label, name, message) => {
    expect(() => loadEnvironment(name)).toThrow(new ConfigError(message));
  });
});

describe('Class: PacedJobsStack', () => {
  describe('Method: constructor (config the schema accepts but the stack cannot build)', () => {
    // Each case breaks the first job (or the shared resources), so the refusal comes before any function is built; and
    // the test context turns bundling off, so a case refused later would still not run esbuild in this unit test.
    it.each(stackConfigCases().map((c) => [c.name, c] as [string, ConfigCase]))('refuses %s with the exact message', (_name, c) => {
      const config = parseEnvironment('corpus', applyChanges(environments[c.base], c.changes));
      let thrown: unknown;
      try {
        new PacedJobsStack(testApp(), 'PacedJobs-corpus', { environmentName: 'corpus', config });
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(InvalidPropsError);
      expect((thrown as InvalidPropsError).message).toBe(c.expect);
    });
  });
});
