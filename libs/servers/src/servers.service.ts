import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, Repository } from 'typeorm';
import { DockerHosts } from '@ws/agent';
import { ApiError, ErrorCode, newId } from '@ws/common';
import { findByRef } from '@ws/database';
import { Zone } from '@ws/zones';
import { Server } from './server.entity';

export interface ServerDefinition {
  hostname: string;
  dockerEndpoint: string;
  zone: Zone;
  publishHost?: string;
  /** Omitted: read from the Docker host. */
  cores?: number;
  memory?: number;
  tlsCaPath?: string | null;
  tlsCertPath?: string | null;
  tlsKeyPath?: string | null;
  enabled?: boolean;
  /** Placement offers cores × this; default 4 (column default). */
  cpuOvercommit?: number;
  /** Placement offers memory × this; default 1. */
  memoryOvercommit?: number;
  /** For images with cpu_allocation_method Inherit: Quotas (default) or Shares. */
  cpuAllocationMethod?: string;
}

/** What `server update` may change on a registered server. */
export type ServerChanges = Partial<Pick<ServerDefinition, 'cores' | 'memory' | 'cpuOvercommit' | 'memoryOvercommit' | 'cpuAllocationMethod' | 'enabled' | 'publishHost'>>;

const MAX_OVERCOMMIT = 64;

/** Refuses capacity settings that would place nothing or everything. */
export function checkCapacitySettings(changes: ServerChanges): void {
  const invalid = (message: string) => new ApiError(ErrorCode.InvalidRequest, message);
  for (const [name, value] of [['cpu overcommit', changes.cpuOvercommit], ['memory overcommit', changes.memoryOvercommit]] as const) {
    if (value !== undefined && (!Number.isFinite(value) || value <= 0 || value > MAX_OVERCOMMIT)) throw invalid(`The ${name} factor must be a number above 0 and at most ${MAX_OVERCOMMIT}, got ${value}`);
  }
  if (changes.cores !== undefined && (!Number.isFinite(changes.cores) || changes.cores <= 0)) throw invalid(`cores must be a positive number, got ${changes.cores}`);
  if (changes.memory !== undefined && (!Number.isSafeInteger(changes.memory) || changes.memory <= 0)) throw invalid(`memory must be a positive number of bytes, got ${changes.memory}`);
  if (changes.cpuAllocationMethod !== undefined && changes.cpuAllocationMethod !== 'Quotas' && changes.cpuAllocationMethod !== 'Shares') {
    throw invalid(`A server's cpu allocation method must be Quotas or Shares, got ${changes.cpuAllocationMethod}`);
  }
}

export const LOCAL_SERVER = { hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', publishHost: '127.0.0.1' };

/** Docker hosts that run workspaces. */
@Injectable()
export class ServersService {
  constructor(
    @InjectRepository(Server) private readonly servers: Repository<Server>,
    private readonly hosts: DockerHosts,
  ) {}

  list(): Promise<Server[]> {
    return this.servers.find({ relations: { zone: true }, order: { hostname: 'ASC' } });
  }

  findByRef(ref: string): Promise<Server> {
    return findByRef(this.servers, ref, 'hostname', 'server');
  }

  /** Adds or updates (by hostname) a server; capacity defaults to what the Docker host reports. */
  async upsert(definition: ServerDefinition): Promise<Server> {
    checkCapacitySettings(definition);
    const existing = await this.servers.findOneBy({ hostname: definition.hostname });
    const id = existing?.id ?? newId();
    let { cores, memory } = definition;
    if (cores === undefined || memory === undefined) {
      const info = await this.hosts
        .get({ id, dockerEndpoint: definition.dockerEndpoint, hostname: definition.hostname, tlsCaPath: definition.tlsCaPath, tlsCertPath: definition.tlsCertPath, tlsKeyPath: definition.tlsKeyPath })
        .info()
        .catch((err: Error) => {
          throw new ApiError(ErrorCode.Unavailable, `Docker at ${definition.dockerEndpoint} did not answer (${err.message}); give --cores and --memory or start it`);
        });
      cores ??= info.ncpu;
      memory ??= info.memTotal;
    }
    await this.servers.save({
      ...(existing ?? {}), id, hostname: definition.hostname, dockerEndpoint: definition.dockerEndpoint, zoneId: definition.zone.id,
      publishHost: definition.publishHost ?? existing?.publishHost ?? '127.0.0.1', cores, memory, enabled: definition.enabled ?? existing?.enabled ?? true,
      tlsCaPath: definition.tlsCaPath ?? null, tlsCertPath: definition.tlsCertPath ?? null, tlsKeyPath: definition.tlsKeyPath ?? null, provider: 'docker',
      ...(definition.cpuOvercommit !== undefined ? { cpuOvercommit: definition.cpuOvercommit } : {}),
      ...(definition.memoryOvercommit !== undefined ? { memoryOvercommit: definition.memoryOvercommit } : {}),
      ...(definition.cpuAllocationMethod !== undefined ? { cpuAllocationMethod: definition.cpuAllocationMethod } : {}),
    });
    this.hosts.evict(id);
    return this.servers.findOneOrFail({ where: { id }, relations: { zone: true } });
  }

  /** Changes only what is given (capacity, overcommit, CPU allocation, enabled) of a registered server. */
  async update(ref: string, changes: ServerChanges): Promise<Server> {
    checkCapacitySettings(changes);
    const server = await this.findByRef(ref);
    const given = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined));
    if (Object.keys(given).length) await this.servers.update({ id: server.id }, given);
    return this.servers.findOneOrFail({ where: { id: server.id }, relations: { zone: true } });
  }

  /** Deletes the row (in the caller's transaction, given one); whether it may go is the workspaces library's ServerRetirement. */
  async remove(server: Server, tx?: EntityManager): Promise<void> {
    await (tx?.getRepository(Server) ?? this.servers).delete({ id: server.id });
    this.hosts.evict(server.id);
  }
}
