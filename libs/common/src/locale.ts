/**
 * client_language and client_timezone (docs/decisions/workspaces.md, "Client language and time zone"): a BCP 47
 * tag ("en-US", "es-419", "zh-Hant-TW"; `_` accepted for `-`) whose language is an ISO 639 code of 2 or 3 letters,
 * and an IANA zone name the time zone database knows ("Europe/Berlin", "EST5EDT", "Etc/GMT+5", links such as
 * "Asia/Calcutta" too).
 */
export interface LanguageTag {
  language: string;
  script?: string;
  region?: string;
}

const MAX_TAG_LENGTH = 35;
/** Zone names: letters, digits, `_ + -`, `/` between parts; never `.` (no path can be spelt). */
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/;

/** The tag's parts when it is a well-formed BCP 47 tag with a 2- or 3-letter language; null otherwise. */
export function parseLanguageTag(value: unknown): LanguageTag | null {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_TAG_LENGTH) return null;
  let locale: Intl.Locale;
  try {
    locale = new Intl.Locale(value.replace(/_/g, '-'));
  } catch {
    return null;
  }
  if (!/^[a-z]{2,3}$/.test(locale.language)) return null;
  return { language: locale.language, ...(locale.script ? { script: locale.script } : {}), ...(locale.region ? { region: locale.region } : {}) };
}

/** Whether the name is a zone of the time zone database (ICU's copy of IANA tzdata). */
export function isKnownTimeZone(value: unknown): value is string {
  if (typeof value !== 'string' || value.length > 64 || !ZONE_NAME.test(value)) return false;
  try {
    new Intl.DateTimeFormat('en', { timeZone: value });
    return true;
  } catch {
    return false;
  }
}
