// Benchmark plumbing: dynalite in its own process, so the database's CPU does not stall the instances' timers (on
// AWS the table is another machine; in-process it would add event-loop lag that no real consumer sees). The one
// implementation is the local stack's own (local/servers.ts startDynamoDb with childProcess), so a bench measures
// DynamoDB as `npm start` runs it.
import { startDynamoDb } from '../local/servers';

export interface DynaliteProcess {
  endpoint: string;
  close(): Promise<void>;
}

/** Starts dynalite (in memory) in a child process on a free loopback port. */
export function startDynaliteProcess(): Promise<DynaliteProcess> {
  return startDynamoDb({ childProcess: true });
}
