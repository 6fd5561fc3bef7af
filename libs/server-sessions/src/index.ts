// What other libraries, the apps and the benchmarks use of @ws/server-sessions; everything else is internal to it.
export { mintRelayCredential } from './rdp-client-connection';
export { ServerSessionsModule } from './server-sessions.module';
export { WorkspaceServerSessions } from './workspace-server-sessions.service';
export type { RdpClientConnectionInfo } from './workspace-server-sessions.service';
