import { Body, Controller } from '@nestjs/common';
import { Operation } from '@ws/auth';
import { PageRequest } from '@ws/database';
import { CreateStagingConfigRequest, StagingConfigRequest, StagingService, toStagingConfigResponse, UpdateStagingConfigRequest } from '@ws/staging';

@Controller('api/public')
export class StagingController {
  constructor(private readonly staging: StagingService) {}

  @Operation('get_staging_configs')
  async list(@Body() body: PageRequest) {
    const { rows, paging } = await this.staging.list(body);
    return { staging_configs: rows.map(toStagingConfigResponse), ...paging };
  }

  @Operation('get_staging_config')
  async get(@Body() body: StagingConfigRequest) {
    return { staging_config: toStagingConfigResponse(await this.staging.get(body.target_staging_config.staging_config_id)) };
  }

  @Operation('create_staging_config')
  async create(@Body() body: CreateStagingConfigRequest) {
    return { staging_config: toStagingConfigResponse(await this.staging.create(body.target_staging_config)) };
  }

  @Operation('update_staging_config')
  async update(@Body() body: UpdateStagingConfigRequest) {
    return { staging_config: toStagingConfigResponse(await this.staging.update(body.target_staging_config)) };
  }

  @Operation('delete_staging_config')
  async delete(@Body() body: StagingConfigRequest) {
    await this.staging.delete(body.target_staging_config.staging_config_id);
    return {};
  }
}
