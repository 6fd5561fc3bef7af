import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ApiError, AppConfig, ErrorCode, newId } from '@ws/common';
import { Image } from './image.entity';
import { ServerCredentialCipher } from './server-credentials';
import { checkServerTarget, checkTargetHost, ServerTarget } from './server-target';
import { ServerTargetRecord } from './server-target.entity';
import { TargetAddressPolicy } from './target-address';

export interface ServerImageDefinition {
  friendlyName: string;
  description?: string;
  imageSrc?: string;
  xRes?: number;
  yRes?: number;
  enabled?: boolean;
  protocol: string;
  host: string;
  port?: number;
  usernameTemplate?: string;
  domain?: string;
  /** Undefined keeps a stored password; '' removes it. */
  password?: string;
  allowOverride?: string[];
  rdpClient?: string;
}

/** Server images (images.kind 'server'): an existing RDP, VNC or SSH server instead of a container image. */
@Injectable()
export class ServerImagesService {
  private readonly cipher: ServerCredentialCipher;
  private readonly targets: TargetAddressPolicy;

  constructor(@InjectDataSource() private readonly db: DataSource, config: AppConfig) {
    this.cipher = new ServerCredentialCipher(config.SERVER_CREDENTIALS_KEY);
    this.targets = new TargetAddressPolicy(config);
  }

  /** Creates or updates (by friendly name) a server image; a container image of that name is never converted. */
  async upsert(definition: ServerImageDefinition): Promise<{ image: Image; target: ServerTarget; hasPassword: boolean }> {
    let target: ServerTarget;
    try {
      target = checkServerTarget(definition);
    } catch (error) {
      throw new ApiError(ErrorCode.InvalidRequest, `Server image ${definition.friendlyName}: ${(error as Error).message}`);
    }
    // Loopback, link-local, metadata and (unless allowed) private targets are refused here, at every request and in the worker.
    await checkTargetHost(this.targets, target.host, `Server image ${definition.friendlyName}: host`);
    if (definition.password && !this.cipher.configured) {
      throw new ApiError(ErrorCode.InvalidRequest, 'SERVER_CREDENTIALS_KEY is not set: server image passwords are stored only encrypted, so set a key of at least 32 characters');
    }
    return this.db.transaction(async (tx) => {
      const existing = await tx.findOneBy(Image, { friendlyName: definition.friendlyName });
      if (existing && existing.kind !== 'server') throw new ApiError(ErrorCode.Conflict, `Image ${definition.friendlyName} is a container image; choose another friendly name`);
      const id = existing?.id ?? newId();
      await tx.save(Image, {
        ...(existing ?? {}), id, kind: 'server' as const, name: `server:${target.protocol}`, friendlyName: definition.friendlyName,
        description: definition.description ?? existing?.description ?? '', imageSrc: definition.imageSrc ?? existing?.imageSrc ?? '',
        xRes: definition.xRes ?? existing?.xRes ?? 1280, yRes: definition.yRes ?? existing?.yRes ?? 720, enabled: definition.enabled ?? existing?.enabled ?? true,
      });
      const stored = await tx.findOneBy(ServerTargetRecord, { imageId: id });
      const passwordEncrypted = definition.password === undefined ? stored?.passwordEncrypted ?? null
        : definition.password === '' ? null : this.cipher.encrypt(definition.password, id);
      await tx.save(ServerTargetRecord, { ...(stored ?? {}), imageId: id, ...target, passwordEncrypted });
      return { image: await tx.findOneOrFail(Image, { where: { id }, relations: { attributes: true } }), target, hasPassword: passwordEncrypted !== null };
    });
  }

  /** The target of a server image and its decrypted password ('' when none is stored); for the launch, never for a listing. */
  async targetOf(imageId: string): Promise<{ target: ServerTarget; password: string }> {
    const record = await this.db.getRepository(ServerTargetRecord).findOneBy({ imageId });
    if (!record) throw new ApiError(ErrorCode.InvalidRequest, `Image ${imageId} is not a server image`);
    const { protocol, host, port, usernameTemplate, domain, allowOverride, rdpClient } = record;
    const password = record.passwordEncrypted ? this.cipher.decrypt(record.passwordEncrypted, imageId) : '';
    return { target: { protocol, host, port, usernameTemplate, domain, allowOverride, rdpClient }, password };
  }
}
