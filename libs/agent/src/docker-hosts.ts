import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { DockerHost, DockerEndpointConfig } from './docker-host';

/** The fields of a Server row the registry needs (the entity fits structurally). */
export interface DockerServerRef {
  id: string;
  dockerEndpoint: string;
  hostname?: string | null;
  tlsCaPath?: string | null;
  tlsCertPath?: string | null;
  tlsKeyPath?: string | null;
}

/**
 * One DockerHost per server id, rebuilt when the server's endpoint or TLS files change. Building is cheap (no
 * connection is made), so a miss only costs reading the TLS files.
 */
@Injectable()
export class DockerHosts implements OnModuleDestroy {
  private readonly hosts = new Map<string, { key: string; host: DockerHost }>();

  /** Overridable for tests. */
  protected build(config: DockerEndpointConfig): DockerHost {
    return DockerHost.fromEndpoint(config);
  }

  get(server: DockerServerRef): DockerHost {
    const key = JSON.stringify([server.dockerEndpoint, server.tlsCaPath ?? null, server.tlsCertPath ?? null, server.tlsKeyPath ?? null, server.hostname ?? null]);
    const cached = this.hosts.get(server.id);
    if (cached && cached.key === key) return cached.host;
    const host = this.build({
      endpoint: server.dockerEndpoint,
      tlsCaPath: server.tlsCaPath,
      tlsCertPath: server.tlsCertPath,
      tlsKeyPath: server.tlsKeyPath,
      name: server.hostname || undefined,
    });
    this.hosts.set(server.id, { key, host });
    return host;
  }

  /** Forget a server (deleted, or its TLS files were rotated in place). */
  evict(serverId: string): void {
    this.hosts.delete(serverId);
  }

  onModuleDestroy(): void {
    this.hosts.clear();
  }
}
