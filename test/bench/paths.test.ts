// Where the bench's tools put their files and how they start their child process, whether they run from this
// repository's TypeScript or from the package's compiled dist/ in a team's app.
import { join } from 'node:path';
import { pacingReportFile } from '../../bench/pacing';
import { providerProcessCommand } from '../../bench/quotaProviderProcess';

describe('Function: providerProcessCommand', () => {
  const options = { allowedPerWindow: 10, windowMs: 1000 };

  it('runs the TypeScript sibling through tsx from the repository root', () => {
    expect(providerProcessCommand(options, '/repo/bench/quotaProviderProcess.ts')).toEqual({
      args: ['--import', 'tsx', '/repo/bench/quotaProviderProcess.ts', JSON.stringify(options)],
      cwd: '/repo',
    });
  });

  it("runs the compiled sibling as is from the package (no tsx: a team's app need not have it)", () => {
    expect(providerProcessCommand(options, '/app/node_modules/paced-jobs/dist/bench/quotaProviderProcess.js')).toEqual({
      args: ['/app/node_modules/paced-jobs/dist/bench/quotaProviderProcess.js', JSON.stringify(options)],
      cwd: '/app/node_modules/paced-jobs/dist',
    });
  });

  it("spawns the running module's own file by default", () => {
    expect(providerProcessCommand(options).args).toContain(
      join(__dirname, '..', '..', 'bench', 'quotaProviderProcess.ts'),
    );
  });
});

describe('Function: pacingReportFile', () => {
  it('is in the .local folder of the folder the command runs in', () => {
    expect(pacingReportFile('/apps/billing')).toBe('/apps/billing/.local/pacing-report.html');
  });
});
