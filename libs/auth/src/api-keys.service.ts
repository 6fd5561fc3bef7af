import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { IsNull, Repository } from 'typeorm';
import { ApiError, ErrorCode, newId, randomSecret, sha256 } from '@ws/common';
import { ApiKey } from './api-key.entity';
import { ApiKeyAuthenticator } from './api-key-authenticator';
import { isPermission, Permission, unmetDependencies } from './permissions';

export interface NewApiKey {
  name: string;
  permissions: string[];
  expiresAt?: Date | null;
  readOnly?: boolean;
}

/** Issuing and administering API keys (the operator's side; the CLI calls this). */
@Injectable()
export class ApiKeysService {
  constructor(
    @InjectRepository(ApiKey) private readonly keys: Repository<ApiKey>,
    private readonly authenticator: ApiKeyAuthenticator,
  ) {}

  async create(input: NewApiKey): Promise<{ key: ApiKey; secret: string }> {
    const permissions = this.checkGrant(input.permissions);
    if (input.expiresAt && Number.isNaN(input.expiresAt.getTime())) throw new ApiError(ErrorCode.InvalidRequest, 'expires is not a valid date');
    const secret = randomSecret(32);
    const key = this.keys.create({
      id: newId(), apiKey: randomSecret(16), name: input.name, secretSha256: sha256(secret), permissions,
      readOnly: input.readOnly ?? false, expiresAt: input.expiresAt ?? null, revokedAt: null,
    });
    await this.keys.insert(key);
    // Other processes forget a remembered miss through the insert notice; this one before answering.
    this.authenticator.evict(key.apiKey);
    return { key, secret };
  }

  list(): Promise<ApiKey[]> {
    return this.keys.find({ where: { revokedAt: IsNull() }, order: { createdAt: 'ASC' } });
  }

  async revoke(apiKey: string): Promise<void> {
    const result = await this.keys.update({ apiKey, revokedAt: IsNull() }, { revokedAt: new Date() });
    if (!result.affected) throw ApiError.invalidId('api_key', apiKey);
    // Other processes learn of it from the change notice; this one forgets the key before answering.
    this.authenticator.evict(apiKey);
  }

  async setPermissions(apiKey: string, permissions: string[]): Promise<ApiKey> {
    const checked = this.checkGrant(permissions);
    const result = await this.keys.update({ apiKey, revokedAt: IsNull() }, { permissions: checked });
    if (!result.affected) throw ApiError.invalidId('api_key', apiKey);
    this.authenticator.evict(apiKey);
    return this.keys.findOneByOrFail({ apiKey });
  }

  /** A grant must name known permissions and include everything they depend on. */
  private checkGrant(names: string[]): Permission[] {
    const unknown = names.filter((n) => !isPermission(n));
    if (unknown.length) throw new ApiError(ErrorCode.InvalidRequest, `Unknown permissions: ${unknown.join(', ')}`);
    const permissions = [...new Set(names)] as Permission[];
    const unmet = unmetDependencies(permissions);
    if (unmet.length) {
      throw new ApiError(ErrorCode.InvalidRequest, `Permissions ${permissions.join(', ')} also need: ${unmet.join(', ')}`);
    }
    return permissions.sort();
  }
}
