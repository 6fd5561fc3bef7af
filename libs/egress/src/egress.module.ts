import { Module } from '@nestjs/common';
import { GroupsModule } from '@ws/groups/groups.module';
import { EgressCatalog } from './egress-catalog.service';
import { EgressConnections } from './egress-connections.service';
import { EgressCredentials } from './egress-credentials.service';

/** Egress providers, gateways, credentials and connections; the data source and AccessService come from the root. */
@Module({ imports: [GroupsModule], providers: [EgressCatalog, EgressCredentials, EgressConnections], exports: [EgressCatalog, EgressCredentials, EgressConnections] })
export class EgressModule {}
