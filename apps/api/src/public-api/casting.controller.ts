import { Body, Controller } from '@nestjs/common';
import { Operation } from '@ws/auth';
import { CastConfigRef, CastingService, CreateCastConfigRequest, toCastConfigResponse, UpdateCastConfigRequest } from '@ws/casting';

@Controller('api/public')
export class CastingController {
  constructor(private readonly casting: CastingService) {}

  @Operation('get_cast_configs')
  async list() {
    return { cast_configs: (await this.casting.list()).map(toCastConfigResponse) };
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
