import { EntityManager, In } from 'typeorm';
import { EgressConnection, EgressCredential, EgressCredentialGateway, EgressGateway, EgressProvider } from './egress.entities';

/** A credential with what its response shows: provider, usable gateways, live connection count. */
export interface EgressCredentialView {
  credential: EgressCredential;
  provider: EgressProvider;
  /** Every gateway of the provider with allow_all_gateways, else the selected ones; by name. */
  gateways: EgressGateway[];
  activeConnections: number;
}

/** Views of the given credentials (all of them when `ids` is omitted), oldest first. */
export async function loadCredentialViews(db: EntityManager, ids?: string[]): Promise<EgressCredentialView[]> {
  const credentials = await db.getRepository(EgressCredential).find({
    where: ids ? { id: In(ids) } : {},
    relations: { provider: true },
    order: { createdAt: 'ASC', id: 'ASC' },
  });
  if (credentials.length === 0) return [];
  const credentialIds = credentials.map((c) => c.id);
  const providerIds = [...new Set(credentials.map((c) => c.providerId))];
  // One after another: inside a transaction they share one connection anyway.
  const gateways = await db.getRepository(EgressGateway).find({ where: { providerId: In(providerIds) }, order: { name: 'ASC' } });
  const selections = await db.getRepository(EgressCredentialGateway).find({ where: { credentialId: In(credentialIds) } });
  const counts = await db.getRepository(EgressConnection)
      .createQueryBuilder('e')
      .select('e.credential_id', 'credential_id')
      .addSelect('count(*)::int', 'count')
      .where('e.credential_id IN (:...credentialIds)', { credentialIds })
      .groupBy('e.credential_id')
      .getRawMany<{ credential_id: string; count: number }>();
  const countOf = new Map(counts.map((r) => [r.credential_id, r.count]));
  return credentials.map((credential) => {
    const selected = new Set(selections.filter((s) => s.credentialId === credential.id).map((s) => s.gatewayId));
    return {
      credential,
      provider: credential.provider as EgressProvider,
      gateways: gateways.filter((g) => g.providerId === credential.providerId && (credential.allowAllGateways || selected.has(g.id))),
      activeConnections: countOf.get(credential.id) ?? 0,
    };
  });
}
