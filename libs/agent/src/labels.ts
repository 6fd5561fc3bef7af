/** The labels on every container of this service, so a reconciler can find orphans in both directions. */
export const LABELS = {
  workspaceId: 'workspace-server.workspace-id',
  deploymentId: 'workspace-server.deployment-id',
  /** What a container is beside a workspace's own: `egress` (its sidecar), `network-holder` (a pre-made namespace). */
  role: 'workspace-server.role',
  /** JSON port map (name → "5900/tcp"), set by DockerHost.createWorkspaceContainer; inspect() reads it back. */
  ports: 'workspace-server.ports',
} as const;
