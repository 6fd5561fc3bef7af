import { fillPathTemplates, InvalidContainerSpecError, usernameForKey, VolumeTemplateValues } from '@ws/agent';
import { validateKey } from '@ws/storage';

/** Thrown for an image's persistent_profile_path that cannot name a store; the launch answers 400 with it. */
export class InvalidProfilePathError extends Error {}

const S3_LOCATION = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/;

/**
 * The store url of a user's persistent profile: the image's persistent_profile_path with `{username}`,
 * `{user_id}` and `{image_id}` filled in (values are object-key safe: ids as 32 hex digits, the username
 * escaped injectively, see usernameForKey), without a trailing slash so one profile has one spelling.
 * Must be file://<path> or s3://<bucket>[/<prefix>]; anything else throws InvalidProfilePathError.
 */
export function resolveProfileLocation(template: string, values: VolumeTemplateValues): string {
  const what = 'persistent_profile_path';
  let location: string;
  try {
    location = fillPathTemplates(template.trim(), values, what, usernameForKey).replace(/^([a-z0-9]+:\/\/.+?)\/+$/, '$1');
  } catch (err) {
    if (err instanceof InvalidContainerSpecError) throw new InvalidProfilePathError(err.message);
    throw err;
  }
  if (location.startsWith('file://')) {
    const path = location.slice('file://'.length);
    if (!path || path.split('/').some((segment) => segment === '..') || /[\0\n\r]/.test(path)) {
      throw new InvalidProfilePathError(`${what} ${JSON.stringify(location)} must name a directory without ".." segments`);
    }
    return location;
  }
  const s3 = S3_LOCATION.exec(location);
  if (s3) {
    if (s3[2]) {
      try {
        validateKey(s3[2]);
      } catch {
        throw new InvalidProfilePathError(`${what} ${JSON.stringify(location)}: the prefix must be segments of [A-Za-z0-9._=+@-]`);
      }
    }
    return location;
  }
  throw new InvalidProfilePathError(`${what} ${JSON.stringify(location)} must be file://<path> or s3://<bucket>[/<prefix>]`);
}

/** A profile generation's object key: `<uuid>.tar` at the top of the profile's store. */
export const GENERATION_KEY = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tar$/;
