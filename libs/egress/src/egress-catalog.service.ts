import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryFailedError } from 'typeorm';
import { ApiError, ErrorCode, newId, parseId } from '@ws/common';
import { findByRef } from '@ws/database';
import { Group } from '@ws/groups';
import { Image } from '@ws/images';
import { User } from '@ws/users';
import { EGRESS_PROVIDER_TYPES, EgressGateway, EgressProvider, EgressProviderType } from './egress.entities';

const UNIQUE_VIOLATION = '23505';

export interface NewEgressGateway {
  name: string;
  endpoint?: string;
  config?: Record<string, unknown>;
}

/** Providers and gateways (the operator CLI manages them), and the operator's references to users, groups and images. */
@Injectable()
export class EgressCatalog {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  listProviders(): Promise<EgressProvider[]> {
    return this.db.getRepository(EgressProvider).find({ order: { name: 'ASC' } });
  }

  findProvider(ref: string): Promise<EgressProvider> {
    return findByRef(this.db.getRepository(EgressProvider), ref, 'name', 'egress_provider_id');
  }

  async createProvider(name: string, type: string): Promise<EgressProvider> {
    if (!(EGRESS_PROVIDER_TYPES as readonly string[]).includes(type)) {
      throw new ApiError(ErrorCode.InvalidRequest, `egress provider type must be one of ${EGRESS_PROVIDER_TYPES.join(', ')} (got ${type})`);
    }
    if (!name.trim()) throw new ApiError(ErrorCode.InvalidRequest, 'egress provider name must not be empty');
    const provider = this.db.getRepository(EgressProvider).create({ id: newId(), name, type: type as EgressProviderType });
    await unique(() => this.db.getRepository(EgressProvider).insert(provider), `an egress provider named ${name} exists`);
    return this.db.getRepository(EgressProvider).findOneByOrFail({ id: provider.id });
  }

  /** Removes the provider with its gateways and credentials; refused while a workspace uses one of its credentials. */
  async removeProvider(ref: string): Promise<void> {
    const provider = await this.findProvider(ref);
    await this.db.transaction(async (tx) => {
      const [{ active }] = (await tx.query(
        'SELECT count(*)::int AS active FROM egress_connections e JOIN egress_credentials c ON c.id = e.credential_id WHERE c.provider_id = $1',
        [provider.id],
      )) as Array<{ active: number }>;
      if (active > 0) throw new ApiError(ErrorCode.Conflict, `egress provider ${provider.name} has ${active} live connection(s); destroy those workspaces first`);
      await tx.getRepository(EgressProvider).delete({ id: provider.id });
    });
  }

  async listGateways(providerRef?: string): Promise<EgressGateway[]> {
    const where = providerRef ? { providerId: (await this.findProvider(providerRef)).id } : {};
    return this.db.getRepository(EgressGateway).find({ where, relations: { provider: true }, order: { name: 'ASC' } });
  }

  /** A gateway by id, or by name (with the provider when two providers have one of that name). */
  async findGateway(ref: string, providerRef?: string): Promise<EgressGateway> {
    const id = parseId(ref);
    const candidates = await this.db.getRepository(EgressGateway).find({
      where: id ? { id } : { name: ref, ...(providerRef ? { providerId: (await this.findProvider(providerRef)).id } : {}) },
      relations: { provider: true },
    });
    if (candidates.length > 1) throw new ApiError(ErrorCode.InvalidRequest, `several providers have a gateway named ${ref}; name the provider or use the id`);
    if (!candidates[0]) throw ApiError.invalidId('egress_gateway_id', ref);
    return candidates[0];
  }

  async createGateway(providerRef: string, fields: NewEgressGateway): Promise<EgressGateway> {
    const provider = await this.findProvider(providerRef);
    if (!fields.name.trim()) throw new ApiError(ErrorCode.InvalidRequest, 'egress gateway name must not be empty');
    const id = newId();
    await unique(
      () => this.db.getRepository(EgressGateway).save(this.db.getRepository(EgressGateway).create({ id, providerId: provider.id, name: fields.name, endpoint: fields.endpoint ?? '', config: fields.config ?? {} })),
      `the provider ${provider.name} has a gateway named ${fields.name}`,
    );
    return this.db.getRepository(EgressGateway).findOneOrFail({ where: { id }, relations: { provider: true } });
  }

  /** Removes the gateway (and it from credentials' selections); live connections through it keep their count. */
  async removeGateway(ref: string, providerRef?: string): Promise<void> {
    const gateway = await this.findGateway(ref, providerRef);
    await this.db.getRepository(EgressGateway).delete({ id: gateway.id });
  }

  /** A user by id or username, a group by id or name, an image by id or friendly name: the id. */
  async ownerId(kind: 'user' | 'group' | 'image', ref: string): Promise<string> {
    switch (kind) {
      case 'user':
        return (await findByRef(this.db.getRepository(User), ref, 'username', 'user_id')).id;
      case 'group':
        return (await findByRef(this.db.getRepository(Group), ref, 'name', 'group_id')).id;
      case 'image':
        return (await findByRef(this.db.getRepository(Image), ref, 'friendlyName', 'image_id')).id;
    }
  }
}

async function unique(write: () => Promise<unknown>, conflict: string): Promise<void> {
  try {
    await write();
  } catch (err) {
    if (err instanceof QueryFailedError && (err.driverError as { code?: string }).code === UNIQUE_VIOLATION) throw new ApiError(ErrorCode.Conflict, conflict);
    throw err;
  }
}
