import { Body, Controller } from '@nestjs/common';
import { Operation } from '@ws/auth';
import { PageRequest } from '@ws/database';
import { CastConfigRef, CastingService, CreateCastConfigRequest, toCastConfigResponse, UpdateCastConfigRequest } from '@ws/casting';

@Controller('api/public')
export class CastingController {
  constructor(private readonly casting: CastingService) {}

  @Operation('get_cast_configs')
  async list(@Body() body: PageRequest) {
    const { rows, paging } = await this.casting.list(body);
    return { cast_configs: rows.map(toCastConfigResponse), ...paging };
  }

  @Operation('get_cast_config')
  async get(@Body() body: CastConfigRef) {
    return { cast_config: toCastConfigResponse(await this.casting.get(body.cast_config_id)) };
  }

  @Operation('create_cast_config')
  async create(@Body() body: CreateCastConfigRequest) {
    return { cast_config: toCastConfigResponse(await this.casting.create(body.target_cast_config)) };
  }

  @Operation('update_cast_config')
  async update(@Body() body: UpdateCastConfigRequest) {
    return { cast_config: toCastConfigResponse(await this.casting.update(body.target_cast_config)) };
  }

  @Operation('delete_cast_config')
  async delete(@Body() body: CastConfigRef) {
    await this.casting.delete(body.cast_config_id);
    return {};
  }
}
