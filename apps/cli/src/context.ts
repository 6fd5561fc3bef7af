import { INestApplicationContext, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { CliModule } from './cli.module';

let context: Promise<INestApplicationContext> | null = null;

/** The application context, made on first use so `--help` needs no database. */
export async function service<T>(type: Type<T>): Promise<T> {
  context ??= NestFactory.createApplicationContext(CliModule.forRoot(), { logger: ['error'], abortOnError: false });
  return (await context).get(type);
}

export async function closeContext(): Promise<void> {
  const current = context;
  context = null;
  if (current) await (await current).close();
}

/** Prints JSON with --json, else a compact human form. */
export function print(value: unknown, json: boolean): void {
  if (json) console.log(JSON.stringify(value, null, 2));
  else if (Array.isArray(value)) value.forEach((row) => console.log(Object.entries(row as object).map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`).join('  ')));
  else console.log(Object.entries(value as object).map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`).join('\n'));
}

export const collect = (value: string, previous: string[] = []) => [...previous, value];

export function int(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n)) throw new Error(`not a whole number: ${value}`);
  return n;
}

export function num(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n)) throw new Error(`not a number: ${value}`);
  return n;
}

/** Sizes like 2G, 512M, 1073741824. */
export function bytes(value: string): number {
  const match = /^(\d+(?:\.\d+)?)([KMGT]i?B?)?$/i.exec(value.trim());
  if (!match) throw new Error(`not a size: ${value} (use 2G, 512M or bytes)`);
  const unit = (match[2] ?? '').toUpperCase()[0];
  const scale = unit ? 1024 ** ('KMGT'.indexOf(unit) + 1) : 1;
  return Math.round(Number(match[1]) * scale);
}

/** The whole of stdin without its final line break: a secret piped in or typed, never a command-line argument (ps, shell history). */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}
