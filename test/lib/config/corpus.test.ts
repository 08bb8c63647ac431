// The invalid-config corpus (test/corpus/config.json): every rule of lib/config/schema.ts fails with one exact message.
// Its stack cases (config the schema lets through but the constructs refuse) are test/lib/stack.test.ts's: PacedJobs
// reads each job's entry with esbuild, a child process this unit tier does not start.
import { environments } from '../../fixtures/environments';
import { ConfigError, loadEnvironment, parseEnvironment } from '../../../lib/config/load';
import { applyChanges, configCases, type ConfigCase } from '../../corpus/loadCorpus';

const cases = configCases();

describe('Function: parseEnvironment', () => {
  it('starts every case from an environment that is valid as it stands', () => {
    for (const base of new Set(cases.map((c) => c.base)))
      expect(() => parseEnvironment(base, environments[base])).not.toThrow();
  });

  it.each(cases.map((c) => [c.name, c] as [string, ConfigCase]))(
    'rejects %s with the exact message naming the key',
    (_name, c) => {
      const input = applyChanges(environments[c.base], c.changes);
      let thrown: unknown;
      try {
        parseEnvironment('corpus', input);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      // `{appResources.tables}` in a case stands for the environment's table keys, which grow with the jobs a user adds.
      const expected = c.expect.replace(
        '{appResources.tables}',
        Object.keys((input as { appResources?: { tables?: object } }).appResources?.tables ?? {}).join(', '),
      );
      expect((thrown as ConfigError).problems).toEqual([expected]);
      expect((thrown as ConfigError).message).toBe(`Invalid configuration for environment "corpus":\n  - ${expected}`);
    },
  );

  // Problems come in schema order (appResources before jobs), whatever order the changes were made in.
  it('reports every problem of a config that breaks several rules at once, in one error', () => {
    const picked = ['table name with spaces', 'cron with 5 fields', 'rate limit starts zero'].map(
      (name) => cases.find((c) => c.name === name) as ConfigCase,
    );
    const input = applyChanges(
      environments.dev,
      picked.flatMap((c) => c.changes),
    );
    expect(() => parseEnvironment('corpus', input)).toThrow(
      new ConfigError(
        `Invalid configuration for environment "corpus":\n${picked.map((c) => `  - ${c.expect}`).join('\n')}`,
      ),
    );
  });
});

describe('Function: loadEnvironment', () => {
  it.each([
    ['an unknown name', 'qa', 'Unknown environment "qa". Valid environments: dev, staging, prod.'],
    [
      'a name that is an Object prototype key',
      'constructor',
      'Unknown environment "constructor". Valid environments: dev, staging, prod.',
    ],
    ['an empty name', '', 'No environment chosen. Pass -c env=<name>; valid environments: dev, staging, prod.'],
    ['no name', undefined, 'No environment chosen. Pass -c env=<name>; valid environments: dev, staging, prod.'],
  ])('rejects %s with the exact message', (_label, name, message) => {
    expect(() => loadEnvironment(name)).toThrow(new ConfigError(message));
  });
});
