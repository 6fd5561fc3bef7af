/** Spec timestamps: `YYYY-MM-DD HH:MM:SS.ffffff`, UTC. */
export function formatTimestamp(date: Date): string;
export function formatTimestamp(date: Date | null | undefined): string | null;
export function formatTimestamp(date: Date | null | undefined): string | null {
  if (!date) return null;
  const iso = date.toISOString(); // 2026-11-21T02:30:55.123Z
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}000`;
}

export function addSeconds(date: Date, seconds: number): Date {
  return new Date(date.getTime() + seconds * 1000);
}
