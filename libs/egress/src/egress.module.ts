import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { GroupsModule } from '@ws/groups';
import { EgressCatalog } from './egress-catalog.service';
import { EgressConnections } from './egress-connections.service';
import { EgressCredentials } from './egress-credentials.service';
import { EgressSecrets } from './egress-secrets';
import { EgressConnection, EgressCredential, EgressCredentialGateway, EgressGateway, EgressProvider } from './egress.entities';

/** Egress providers, gateways, credentials and connections; AccessService comes from the root. */
@Module({
  imports: [TypeOrmModule.forFeature([EgressProvider, EgressGateway, EgressCredential, EgressCredentialGateway, EgressConnection]), GroupsModule],
  providers: [EgressCatalog, EgressCredentials, EgressConnections, EgressSecrets],
  exports: [EgressCatalog, EgressCredentials, EgressConnections, EgressSecrets],
})
export class EgressModule {}
