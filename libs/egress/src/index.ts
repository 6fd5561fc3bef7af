// What other libraries and the apps use of @ws/egress; everything else is internal to it.
export { DeleteEgressCredentialRequest, EgressCredentialChanges, UpdateEgressCredentialRequest } from './dto/egress.requests';
export { EgressCatalog } from './egress-catalog.service';
export { EgressConnections, egressEnvironment } from './egress-connections.service';
export type { EgressReservation, EgressReservationRequest } from './egress-connections.service';
export { EgressConfigError, egressSidecarFiles, SIDECAR_PROVIDER_TYPES } from './egress-sidecar-config';
export type { EgressSidecarFiles } from './egress-sidecar-config';
export { EgressCredentials, REQUIRED_CREDENTIAL_FIELDS } from './egress-credentials.service';
export { EgressSecrets } from './egress-secrets';
export { EGRESS_PROVIDER_TYPES, EgressConnection, EgressCredential, EgressCredentialGateway, EgressGateway, EgressProvider } from './egress.entities';
export { toEgressCredentialResponse, toEgressProviderResponse } from './egress.mappers';
export { EgressModule } from './egress.module';
