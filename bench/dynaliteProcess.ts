// Benchmark plumbing: dynalite in its own process, so the database's CPU does not stall the instances' timers (on
// AWS the table is another machine; in-process it would add event-loop lag that no real consumer sees).
import { ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

export interface DynaliteProcess {
  endpoint: string;
  close(): Promise<void>;
}

// Plain JavaScript for `node -e`: the child needs no TypeScript loader, whether the parent runs under tsx or jest.
const CHILD = `
const server = require('dynalite')({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
process.on('disconnect', () => process.exit(0));
`;

/** Starts dynalite (in memory) in a child process on a free loopback port. */
export function startDynaliteProcess(): Promise<DynaliteProcess> {
  const child: ChildProcess = spawn(process.execPath, ['-e', CHILD], {
    cwd: path.resolve(__dirname, '..'),
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`dynalite child process exited before listening (code ${code})`));
    child.once('error', reject);
    child.once('exit', onExit);
    child.once('message', (message: { port: number }) => {
      child.off('exit', onExit);
      resolve({
        endpoint: `http://127.0.0.1:${message.port}`,
        close: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.once('exit', () => done());
            child.kill();
          }),
      });
    });
  });
}
