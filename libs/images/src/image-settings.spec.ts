import { ApiError, httpStatusFor } from '@ws/common';
import { checkExecConfig, checkImageLaunchSettings, checkImagePermissions, permissionsToSaveImage } from './image-settings';

const apiError = (fn: () => unknown): ApiError => {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error('expected an ApiError');
};

describe('image launch settings on save', () => {
  it('accepts the documented shapes', () => {
    expect(() =>
      checkImageLaunchSettings('Office', {
        runConfig: { hostname: 'office', shm_size: '1g', add_host: ['db:10.0.0.5'] },
        volumeMappings: { '/srv/homes/{username}': { bind: '/home/user/data', mode: 'rw' } },
        cpuAllocationMethod: 'Shares',
        execConfig: { first_launch: { environment: { A: '1' }, cmd: 'touch /tmp/x' }, go: { cmd: 'echo hi' } },
      }, []),
    ).not.toThrow();
  });

  it('refuses with 400 naming the image and the key', () => {
    const cases: Array<[object, RegExp]> = [
      [{ runConfig: { privileged: true } }, /^Image Office: run_config\.privileged is not allowed/],
      [{ runConfig: { security_opt: ['seccomp=unconfined'] } }, /WORKSPACE_SECURITY_OPTS_ALLOWED/],
      [{ volumeMappings: { '/srv/../etc': { bind: '/x' } } }, /^Image Office: volume_mappings\["\/srv\/\.\.\/etc"\]/],
      [{ cpuAllocationMethod: 'Hard' }, /^Image Office: cpu_allocation_method must be one of Inherit, Quotas, Shares/],
      [{ execConfig: { first_launch: { cmd: 'x', user: 'root' } } }, /exec_config\.first_launch\.user is not a field/],
      [{ execConfig: { go: { cmd: 5 } } }, /exec_config\.go\.cmd must be a shell command/],
      [{ execConfig: { later: {} } }, /exec_config\.later is not a field/],
      [{ execConfig: { first_launch: { environment: { VNC_PASSWORD: 'x' } } } }, /VNC_PASSWORD is set by the server/],
      [{ execConfig: { first_launch: { environment: { 'A-B': 'x' } } } }, /"A-B" is not a variable name/],
    ];
    for (const [settings, message] of cases) {
      const err = apiError(() => checkImageLaunchSettings('Office', settings, []));
      expect({ status: httpStatusFor(err.code), message: err.message }).toEqual({ status: 400, message: expect.stringMatching(message) });
    }
  });

  it('lets the operator allow a sandbox-weakening option explicitly', () => {
    expect(() => checkImageLaunchSettings('Office', { runConfig: { security_opt: ['seccomp=unconfined'] } }, ['seccomp=unconfined'])).not.toThrow();
  });

  it('exec_config: empty and partial objects are fine', () => {
    expect(() => checkExecConfig({})).not.toThrow();
    expect(() => checkExecConfig({ first_launch: { environment: {}, cmd: '' }, go: { cmd: '' } })).not.toThrow();
    expect(() => checkExecConfig('echo')).toThrow(/exec_config must be an object/);
  });
});

describe('who may save image resource fields', () => {
  it('resource fields need Images Modify Resources (spec rule 7), others Images Modify or Create', () => {
    expect(permissionsToSaveImage(['description', 'friendly_name'], false)).toEqual(['Images Modify']);
    expect(permissionsToSaveImage(['run_config'], false)).toEqual(['Images Modify', 'Images Modify Resources']);
    expect(permissionsToSaveImage(['volume_mappings'], true)).toEqual(['Images Create', 'Images Modify Resources']);
    for (const field of ['cores', 'memory', 'cpu_allocation_method', 'exec_config', 'hash', 'container_registry']) {
      expect(permissionsToSaveImage([field], false)).toContain('Images Modify Resources');
    }
  });

  it('refuses with 403 naming the missing permission and the fields', () => {
    const err = apiError(() => checkImagePermissions(['description', 'run_config', 'volume_mappings'], false, ['Images Modify']));
    expect({ status: httpStatusFor(err.code), message: err.message }).toEqual({ status: 403, message: 'Saving this image needs Images Modify Resources (for run_config, volume_mappings)' });
    expect(() => checkImagePermissions(['run_config'], false, ['Images Modify', 'Images Modify Resources'])).not.toThrow();
    expect(() => checkImagePermissions(['run_config'], true, ['Global Admin'])).not.toThrow();
    expect(() => checkImagePermissions(['description'], false, ['Images View'])).toThrow(/needs Images Modify$/);
  });
});
