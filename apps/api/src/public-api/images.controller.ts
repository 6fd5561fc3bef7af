import { Body, Controller } from '@nestjs/common';
import { IsBoolean, IsOptional } from 'class-validator';
import { Operation } from '@ws/auth';
import { PageRequest } from '@ws/database';
import { ImagesService, toImageResponse } from '@ws/images';
import { toZoneResponse, ZonesService } from '@ws/zones';

class GetZonesRequest {
  @IsOptional() @IsBoolean() brief?: boolean;
}

@Controller('api/public')
export class ImagesController {
  constructor(
    private readonly images: ImagesService,
    private readonly zones: ZonesService,
  ) {}

  @Operation('get_images')
  async getImages(@Body() body: PageRequest) {
    const [{ rows: images, paging }, zones] = await Promise.all([this.images.listPaged(body), this.zones.list()]);
    const zoneNames = new Map(zones.map((z) => [z.id, z.name]));
    return { images: images.map((i) => toImageResponse(i, { zoneName: i.zoneId ? zoneNames.get(i.zoneId) ?? null : null })), ...paging };
  }

  @Operation('get_zones')
  async getZones(@Body() body: GetZonesRequest) {
    return { zones: (await this.zones.list()).map((z) => toZoneResponse(z, body.brief ?? false)) };
  }
}
