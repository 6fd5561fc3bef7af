import { Column, ColumnOptions, CreateDateColumn, UpdateDateColumn } from 'typeorm';

/** Timestamps are always `timestamptz`; the wire format prints them in UTC. */
export const TimestampColumn = (options: ColumnOptions = {}) => Column({ type: 'timestamptz', ...options });
export const CreatedAt = () => CreateDateColumn({ type: 'timestamptz' });
export const UpdatedAt = () => UpdateDateColumn({ type: 'timestamptz' });

/** bigint columns come back from pg as strings; these are far below 2^53. */
export const BigIntColumn = (options: ColumnOptions = {}) =>
  Column({ type: 'bigint', transformer: { to: (v: number | null) => v, from: (v: string | null) => (v === null ? null : Number(v)) }, ...options });

export const NumericColumn = (options: ColumnOptions = {}) =>
  Column({ type: 'numeric', transformer: { to: (v: number | null) => v, from: (v: string | null) => (v === null ? null : Number(v)) }, ...options });
