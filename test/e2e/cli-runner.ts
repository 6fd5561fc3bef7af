import { Readable } from 'node:stream';
import { closeContext } from '../../apps/cli/src/context';
import { buildProgram } from '../../apps/cli/src/program';
import type { TestApi } from './harness';

/** Runs the operator CLI in-process with the environment's database (as an operator runs it); answers what it printed. */
export async function runCli(...args: string[]): Promise<string> {
  const lines: string[] = [];
  const spy = jest.spyOn(console, 'log').mockImplementation((...parts: unknown[]) => void lines.push(parts.join(' ')));
  try {
    await buildProgram().parseAsync(['node', 'cli', ...args]);
  } finally {
    spy.mockRestore();
  }
  return lines.join('\n');
}

/** runCli with `input` as its stdin (what an operator pipes into --password-stdin or --secret-stdin). */
export async function runCliWithStdin(input: string, ...args: string[]): Promise<string> {
  const original = Object.getOwnPropertyDescriptor(process, 'stdin') as PropertyDescriptor;
  Object.defineProperty(process, 'stdin', { value: Readable.from([Buffer.from(input)]), configurable: true });
  try {
    return await runCli(...args);
  } finally {
    Object.defineProperty(process, 'stdin', original);
  }
}

/**
 * Points the in-process CLI at `api`'s database, Redis prefix and deployment, as an operator's shell on that
 * deployment would be. Answers the undo, for afterAll: closes the CLI's context and restores the environment.
 */
export function useApiForCli(api: TestApi): () => Promise<void> {
  const saved = { ...process.env };
  Object.assign(process.env, { DATABASE_NAME: api.config.DATABASE_NAME, REDIS_PREFIX: api.config.REDIS_PREFIX, DEPLOYMENT_ID: api.config.DEPLOYMENT_ID, SERVER_CREDENTIALS_KEY: api.config.SERVER_CREDENTIALS_KEY, LOG_LEVEL: 'error' });
  return async () => {
    await closeContext();
    process.env = saved;
  };
}
