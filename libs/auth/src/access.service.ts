import { Injectable } from '@nestjs/common';
import { ApiError, ErrorCode } from '@ws/common';
import type { Caller } from './caller';
import { missingPermissions, Permission } from './permissions';

/** Target-dependent permission checks, asked by services; refusals look exactly like the guard's. */
@Injectable()
export class AccessService {
  require(caller: Caller, permissions: readonly Permission[], because?: string): void {
    const missing = missingPermissions(caller.permissions, permissions);
    if (missing.length) throw forbidden(missing, because);
  }
}

export function forbidden(missing: Permission[], because?: string): ApiError {
  const reason = because ? ` (${because})` : '';
  return new ApiError(ErrorCode.Forbidden, `Missing permissions${reason}: ${missing.join(', ')}`);
}
