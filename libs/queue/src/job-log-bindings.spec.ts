import { jobLogBindings } from './queue-workers';

describe('job log bindings', () => {
  it("carry the job's id, name and queue and the ids of its payload", () => {
    expect(jobLogBindings('workspaces', { id: 'provision:w1', name: 'workspace.provision', data: { workspaceId: 'w1', reason: 'requested' } })).toEqual({
      job_id: 'provision:w1', job: 'workspace.provision', queue: 'workspaces', workspace_id: 'w1',
    });
    expect(jobLogBindings('maintenance', { id: 'x', name: 'staging.reconcile', data: { stagingConfigId: 'c1' } })).toMatchObject({ staging_config_id: 'c1' });
  });
});
