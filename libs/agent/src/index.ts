// What other libraries and the apps use of @ws/agent; everything else is internal to it.
export { AgentModule } from './agent.module';
export { RESERVED_ENV, buildContainerSpec, containerNameFor, egressSidecarNameFor, portsFromAttributes } from './container-spec';
export { DockerHost } from './docker-host';
export type { ContainerState, ContainerSummary, EngineImage, ExecResult, StreamingExec, WorkspaceContainerSpec } from './docker-host';
export { DockerHosts } from './docker-hosts';
export { AgentError, ContainerNotFoundError, ContainerNotRunningError, ContainerPathNotFoundError, ExecTimeoutError, ExecUserNotAllowedError, ImageNotFoundError, InvalidContainerSpecError, isTransientDockerError } from './errors';
export { LABELS } from './labels';
export { fillPathTemplates, parseCpuAllocationMethod, parseRunConfig, parseVolumeMappings, usernameForKey } from './launch-settings';
export type { VolumeTemplateValues } from './launch-settings';
export { waitForRfb } from './rfb';
export { WORKSPACE_NETWORK, ensureWorkspaceNetwork, networkExists } from './workspace-network';
