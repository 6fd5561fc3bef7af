import { buildProgram } from '../../apps/cli/src/program';

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
