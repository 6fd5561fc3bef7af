import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In } from 'typeorm';
import { AccessService, Caller } from '@ws/auth';
import { ApiError, ErrorCode, newId, parseId, toWireId } from '@ws/common';
import { Group, GroupsService } from '@ws/groups';
import { Image } from '@ws/images';
import { User } from '@ws/users';
import type { EgressCredentialChanges, EgressCredentialRef } from './dto/egress.requests';
import { EgressConnection, EgressCredential, EgressCredentialGateway, EgressGateway, EgressProvider, EgressProviderType } from './egress.entities';
import { EgressSecrets } from './egress-secrets';
import { EgressCredentialView, loadCredentialViews } from './egress-views';

const FIELD = 'target_egress_credential';

/** The secret fields, wire name → entity property. A value of only asterisks (a masked response sent back) keeps the stored one. */
const SECRET_FIELDS = { password: 'password', vpn_private_key: 'vpnPrivateKey', mesh_key: 'meshKey', custom_credential: 'customCredential' } as const;
type SecretProperty = (typeof SECRET_FIELDS)[keyof typeof SECRET_FIELDS] | 'username';

/** The credential fields each provider type needs, as wire names. */
export const REQUIRED_CREDENTIAL_FIELDS: Record<EgressProviderType, ReadonlyArray<'username' | keyof typeof SECRET_FIELDS>> = {
  username_password_vpn: ['username', 'password'],
  key_pair_tunnel: ['vpn_private_key'],
  mesh_network: ['mesh_key'],
  custom: ['custom_credential'],
};
const PROPERTY_OF = { username: 'username', ...SECRET_FIELDS } as const;

const MASKED = /^\*+$/;

/** What a credential is attached to: exactly one of the three. */
export type EgressOwner = { kind: 'user'; user: User } | { kind: 'group'; group: Group } | { kind: 'image'; image: Image };

const invalid = (message: string) => new ApiError(ErrorCode.InvalidRequest, message);

/**
 * update_egress_credential (an upsert) and delete_egress_provider_mapping, and the operator CLI's listing. The
 * conditional permissions (by what the credential is attached to, before and after the change; Egress
 * Credentials Create when the upsert creates) are checked here.
 */
@Injectable()
export class EgressCredentials {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly access: AccessService,
    private readonly groups: GroupsService,
    private readonly secrets: EgressSecrets,
  ) {}

  list(): Promise<EgressCredentialView[]> {
    return loadCredentialViews(this.db.manager);
  }

  /** The view with its secrets in clear (the operator CLI's --show-secrets only); throws when one does not decrypt. */
  reveal(view: EgressCredentialView): EgressCredentialView {
    return { ...view, credential: this.secrets.reveal(view.credential) };
  }

  /** Creates the credential when `egress_credential_id` is absent, else changes it; answers it as stored. */
  upsert(caller: Caller, changes: EgressCredentialChanges): Promise<EgressCredentialView> {
    return this.db.transaction(async (tx) => {
      const existing = changes.egress_credential_id === undefined ? null : await this.lockCredential(tx, changes.egress_credential_id, 'egress_credential_id');
      if (existing) await this.requireOwnerAccess(tx, caller, await this.ownerOf(tx, existing));
      else this.access.require(caller, ['Egress Credentials Create'], 'no egress_credential_id: the credential is created');

      const provider = await this.resolveProvider(tx, changes.egress_provider_id ?? existing?.providerId ?? null, changes.egress_provider_id !== undefined);
      const owner = await this.resolveOwner(tx, changes, existing);
      await this.requireOwnerAccess(tx, caller, owner);

      const name = changes.name ?? existing?.name;
      if (name === undefined) throw invalid(`${FIELD}.name is required`);
      const limit = this.resolveLimit(changes, existing);
      const id = existing?.id ?? newId();
      const secrets = this.resolveSecrets(id, changes, existing, provider);
      const allowAllGateways = changes.allow_all_gateways ?? existing?.allowAllGateways ?? false;
      const selected = await this.resolveSelectedGateways(tx, changes, existing, provider, allowAllGateways);

      const row: Omit<EgressCredential, 'createdAt' | 'updatedAt'> = {
        id, name, providerId: provider.id, enabled: changes.enabled ?? existing?.enabled ?? true, ...secrets,
        userId: owner.kind === 'user' ? owner.user.id : null, groupId: owner.kind === 'group' ? owner.group.id : null, imageId: owner.kind === 'image' ? owner.image.id : null,
        allowAllGateways, limitActiveConnections: limit.enabled, activeConnectionLimit: limit.value,
      };
      await tx.getRepository(EgressCredential).save(row);
      if (selected !== null) {
        await tx.getRepository(EgressCredentialGateway).delete({ credentialId: id });
        if (selected.length) await tx.getRepository(EgressCredentialGateway).insert(selected.map((g) => ({ credentialId: id, gatewayId: g.id })));
      }
      const [view] = await loadCredentialViews(tx, [id]);
      return view;
    });
  }

  /**
   * Deletes the credential. One still used by workspaces is refused (409): their containers hold its secret and
   * the connection count would vanish with it; destroy them first.
   */
  async delete(caller: Caller, ref: EgressCredentialRef): Promise<void> {
    const { egress_provider_mapping_id: mappingId, egress_credential_id: credentialId } = ref;
    if (mappingId !== undefined && credentialId !== undefined && parseId(mappingId) !== parseId(credentialId)) {
      throw invalid(`${FIELD}.egress_provider_mapping_id and ${FIELD}.egress_credential_id name the same credential and differ (${mappingId}, ${credentialId})`);
    }
    const given = mappingId ?? credentialId;
    if (given === undefined) throw invalid(`${FIELD}.egress_credential_id (or egress_provider_mapping_id) is required`);
    await this.db.transaction(async (tx) => {
      const credential = await this.lockCredential(tx, given, mappingId !== undefined ? 'egress_provider_mapping_id' : 'egress_credential_id');
      await this.requireOwnerAccess(tx, caller, await this.ownerOf(tx, credential));
      const active = await tx.getRepository(EgressConnection).countBy({ credentialId: credential.id });
      if (active > 0) {
        throw new ApiError(ErrorCode.Conflict, `Egress credential ${toWireId(credential.id)} is used by ${active} live workspace(s); destroy them before deleting it`);
      }
      await tx.getRepository(EgressCredential).delete({ id: credential.id });
    });
  }

  /**
   * Users Modify (Users Modify Admin for a Global Admin), Groups Modify (Groups Modify System for a built-in
   * group) or Images Modify, by what the credential is attached to.
   */
  private async requireOwnerAccess(tx: EntityManager, caller: Caller, owner: EgressOwner): Promise<void> {
    switch (owner.kind) {
      case 'user':
        this.access.require(caller, ['Users Modify'], 'the egress credential is attached to a user');
        if (await this.groups.isGlobalAdmin(owner.user.id, tx)) this.access.require(caller, ['Users Modify Admin'], 'the egress credential is attached to a Global Admin user');
        return;
      case 'group':
        this.access.require(caller, ['Groups Modify'], 'the egress credential is attached to a group');
        if (owner.group.systemKey) this.access.require(caller, ['Groups Modify System'], `the egress credential is attached to the built-in group ${owner.group.name}`);
        return;
      case 'image':
        this.access.require(caller, ['Images Modify'], 'the egress credential is attached to an image');
        return;
      default: {
        const unreachable: never = owner;
        throw new Error(`unknown owner ${String(unreachable)}`);
      }
    }
  }

  private async lockCredential(tx: EntityManager, ref: string, field: string): Promise<EgressCredential> {
    const id = parseId(ref);
    const credential = id
      ? await tx.getRepository(EgressCredential).createQueryBuilder('c').where('c.id = :id', { id }).setLock('pessimistic_write').getOne()
      : null;
    if (!credential) throw ApiError.invalidId(field, ref);
    return credential;
  }

  private async ownerOf(tx: EntityManager, credential: EgressCredential): Promise<EgressOwner> {
    if (credential.userId) return { kind: 'user', user: await tx.getRepository(User).findOneByOrFail({ id: credential.userId }) };
    if (credential.groupId) return { kind: 'group', group: await tx.getRepository(Group).findOneByOrFail({ id: credential.groupId }) };
    return { kind: 'image', image: await tx.getRepository(Image).findOneByOrFail({ id: credential.imageId as string }) };
  }

  private async resolveProvider(tx: EntityManager, ref: string | null, given: boolean): Promise<EgressProvider> {
    if (ref === null) throw invalid(`${FIELD}.egress_provider_id is required`);
    const id = given ? parseId(ref) : ref;
    const provider = id ? await tx.getRepository(EgressProvider).findOneBy({ id }) : null;
    if (!provider) throw ApiError.invalidId('egress_provider_id', ref);
    return provider;
  }

  /** The given attachment (exactly one of the three non-null among those given), else the stored one. */
  private async resolveOwner(tx: EntityManager, changes: EgressCredentialChanges, existing: EgressCredential | null): Promise<EgressOwner> {
    const given = (['user_id', 'group_id', 'image_id'] as const).filter((f) => changes[f] !== undefined);
    const set = given.filter((f) => changes[f] !== null);
    if (given.length === 0 && existing) return this.ownerOf(tx, existing);
    if (set.length !== 1) {
      throw invalid(`${FIELD}: exactly one of user_id, group_id and image_id must be given (the one thing the credential is attached to)` + (set.length > 1 ? `; got ${set.join(', ')}` : ''));
    }
    const field = set[0];
    const ref = changes[field] as string;
    const id = parseId(ref);
    switch (field) {
      case 'user_id': {
        const user = id ? await tx.getRepository(User).findOneBy({ id }) : null;
        if (!user) throw ApiError.invalidId('user_id', ref);
        return { kind: 'user', user };
      }
      case 'group_id': {
        const group = id ? await tx.getRepository(Group).findOneBy({ id }) : null;
        if (!group) throw ApiError.invalidId('group_id', ref);
        return { kind: 'group', group };
      }
      case 'image_id': {
        const image = id ? await tx.getRepository(Image).findOneBy({ id }) : null;
        if (!image) throw ApiError.invalidId('image_id', ref);
        return { kind: 'image', image };
      }
    }
  }

  private resolveLimit(changes: EgressCredentialChanges, existing: EgressCredential | null): { enabled: boolean; value: number | null } {
    // 0 is what an answer carries when no limit is stored (the field is an integer): as absent as null.
    const limit = changes.active_connection_limit === 0 ? undefined : changes.active_connection_limit ?? undefined;
    const alias = changes.active_connections ?? undefined;
    if (limit !== undefined && alias !== undefined && limit !== alias) {
      throw invalid(`${FIELD}.active_connection_limit and ${FIELD}.active_connections name the same limit and differ (${limit}, ${alias})`);
    }
    const enabled = changes.limit_active_connections ?? existing?.limitActiveConnections ?? false;
    const value = limit ?? alias ?? existing?.activeConnectionLimit ?? null;
    // The DTO checks the API's input; this also covers the operator CLI's.
    if (value !== null && (!Number.isInteger(value) || value < 1)) throw invalid(`${FIELD}.active_connection_limit must be a positive integer (${value})`);
    if (enabled && value === null) throw invalid(`${FIELD}.active_connection_limit (a positive integer) is required when limit_active_connections is true`);
    return { enabled, value };
  }

  /**
   * username and the secrets after the change, as stored: a new secret sealed (EgressSecrets), a kept one as it is
   * stored, an empty one as null (unset). The ones the provider type needs must be non-empty.
   */
  private resolveSecrets(id: string, changes: EgressCredentialChanges, existing: EgressCredential | null, provider: EgressProvider): Record<SecretProperty, string | null> {
    const result: Record<SecretProperty, string | null> = {
      username: changes.username !== undefined ? changes.username : existing?.username ?? null,
      password: null, vpnPrivateKey: null, meshKey: null, customCredential: null,
    };
    for (const [wire, property] of Object.entries(SECRET_FIELDS) as Array<[keyof typeof SECRET_FIELDS, (typeof SECRET_FIELDS)[keyof typeof SECRET_FIELDS]]>) {
      const value = changes[wire];
      const kept = existing?.[property] ?? null;
      if (typeof value === 'string' && MASKED.test(value)) {
        if (kept === null) throw invalid(`${FIELD}.${wire} is only asterisks (a masked value) and none is stored: send the secret itself`);
        result[property] = kept;
      } else if (value === undefined) {
        result[property] = kept;
      } else {
        result[property] = value === null || value === '' ? null : this.secrets.seal(id, property, value);
      }
    }
    const missing = REQUIRED_CREDENTIAL_FIELDS[provider.type].filter((wire) => !result[PROPERTY_OF[wire]]);
    if (missing.length) {
      throw invalid(`${FIELD}: ${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required for the ${provider.type} provider ${provider.name}`);
    }
    return result;
  }

  /**
   * The gateways to store as selected (null: keep the stored selection). Each must be a gateway of the
   * credential's provider; at least one is needed while allow_all_gateways is false.
   */
  private async resolveSelectedGateways(
    tx: EntityManager, changes: EgressCredentialChanges, existing: EgressCredential | null, provider: EgressProvider, allowAll: boolean,
  ): Promise<EgressGateway[] | null> {
    const repo = tx.getRepository(EgressGateway);
    if (changes.selected_gateways === undefined) {
      const stored = existing
        ? await repo.createQueryBuilder('g').innerJoin(EgressCredentialGateway, 's', 's.gateway_id = g.id').where('s.credential_id = :id', { id: existing.id }).getMany()
        : [];
      const foreign = stored.filter((g) => g.providerId !== provider.id);
      if (foreign.length) {
        if (allowAll) return [];
        throw invalid(`${FIELD}.selected_gateways is required: the stored gateways belong to the credential's previous provider, not ${provider.name}`);
      }
      if (!allowAll && stored.length === 0) throw invalid(`${FIELD}.selected_gateways (at least one gateway of ${provider.name}) is required when allow_all_gateways is false`);
      return null;
    }
    const refs = changes.selected_gateways;
    const ids = refs.map((ref) => {
      const id = parseId(ref);
      if (!id) throw ApiError.invalidId('egress_gateway_id', ref);
      return id;
    });
    const found = ids.length ? await repo.findBy({ id: In([...new Set(ids)]) }) : [];
    const byId = new Map(found.map((g) => [g.id, g]));
    for (const [i, id] of ids.entries()) {
      const gateway = byId.get(id);
      if (!gateway) throw ApiError.invalidId('egress_gateway_id', refs[i]);
      if (gateway.providerId !== provider.id) throw invalid(`${FIELD}.selected_gateways: gateway ${refs[i]} (${gateway.name}) is not a gateway of the provider ${provider.name}`);
    }
    if (!allowAll && found.length === 0) throw invalid(`${FIELD}.selected_gateways (at least one gateway of ${provider.name}) is required when allow_all_gateways is false`);
    return found;
  }
}
