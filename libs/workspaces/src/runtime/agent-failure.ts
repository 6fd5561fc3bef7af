import { AgentError } from '@ws/agent';
import { ApiError, ErrorCode } from '@ws/common';
import type { Server } from '@ws/servers';

/** A Docker host's failure as the API answers it. */
export function agentFailure(err: unknown, server: Pick<Server, 'hostname'>): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof AgentError) {
    // The agent classifies its errors; a daemon failure it cannot explain reads as the host being unavailable.
    const code = err.apiCode === ErrorCode.Internal ? ErrorCode.Unavailable : err.apiCode;
    return new ApiError(code, `Server ${server.hostname}: ${err.message}`);
  }
  return new ApiError(ErrorCode.Unavailable, `Server ${server.hostname} did not answer: ${(err as Error).message}`);
}
