import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Entitlements } from './entitlements';
import { IssuerKeys } from './issuer-keys';
import { License } from './license.entity';
import { LicensingService } from './licensing.service';

/**
 * Global, like settings: the launch pipeline, staging and casting ask Entitlements without importing this module.
 * The api, the worker and the CLI each import it once at their root.
 */
@Global()
@Module({
  imports: [TypeOrmModule.forFeature([License])],
  providers: [IssuerKeys, Entitlements, LicensingService],
  exports: [IssuerKeys, Entitlements, LicensingService],
})
export class LicensingModule {}
