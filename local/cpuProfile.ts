// An opt-in CPU profile of the local runtime's child processes: with PACED_CPU_PROF_DIR set to a folder, each function's
// execution environment and each server process (dynalite, s3rver) runs under `node --cpu-prof` and writes its profile
// there when it exits. The runtime's own process is profiled the usual way (`node --cpu-prof --import tsx ...`); its
// children do not inherit that, since Lambda's environment and the servers' get no NODE_OPTIONS of the host's.

/** The variable that names the folder profiles are written to. */
export const CPU_PROFILE_ENV = 'PACED_CPU_PROF_DIR';

let profiled = 0;

/**
 * The Node flags that profile a child process named `label` (its profile's file name starts with it), or none when
 * PACED_CPU_PROF_DIR is unset or empty.
 */
export function cpuProfileArgs(label: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const dir = env[CPU_PROFILE_ENV];
  if (!dir) return [];
  // Node 20 takes --cpu-prof-name literally (no pid placeholder), so each child's name is made unique here.
  const name = `${label.replace(/[^A-Za-z0-9._-]/g, '_')}.${process.pid}.${++profiled}.cpuprofile`;
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${name}`];
}

/** True when child processes are being profiled: they must then exit on their own, since a killed one writes nothing. */
export function profilingChildren(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env[CPU_PROFILE_ENV]);
}
