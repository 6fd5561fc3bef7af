import { ApiError, ErrorCode } from '@ws/common';
import { outageDependency } from '../errors/api-exception.filter';
import { operationOf } from './http-metrics';

describe('api request metrics', () => {
  it('labels a request by its operation, else its route pattern, else unmatched', () => {
    const at = (url: string | undefined) => ({ routeOptions: { url } }) as Parameters<typeof operationOf>[0];
    expect(operationOf(at('/api/public/request_workspace'))).toBe('request_workspace');
    expect(operationOf(at('/api/health'))).toBe('/api/health');
    expect(operationOf(at(undefined))).toBe('unmatched');
  });

  it('blames a 503 on its dependency, and a full fleet on none', () => {
    expect(outageDependency(new Error('Connection terminated unexpectedly'), 503)).toBe('postgresql');
    expect(outageDependency(new Error('Connection is closed.'), 503)).toBe('redis');
    expect(outageDependency(new ApiError(ErrorCode.Unavailable, 'Redis is unavailable; retry later'), 503)).toBe('redis');
    expect(outageDependency(new ApiError(ErrorCode.Unavailable, 'Server local did not answer: timeout'), 503)).toBe('other');
    expect(outageDependency(new ApiError(ErrorCode.NoCapacity, 'No capacity'), 503)).toBeNull();
    expect(outageDependency(new ApiError(ErrorCode.InvalidRequest, 'bad'), 400)).toBeNull();
  });
});
