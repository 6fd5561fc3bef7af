import { Body, Controller } from '@nestjs/common';
import { Operation } from '@ws/auth';
import { ActivateRequest, LicensingService, toLicenseResponse } from '@ws/licensing';

@Controller('api/public')
export class LicensingController {
  constructor(private readonly licensing: LicensingService) {}

  @Operation('activate')
  async activate(@Body() body: ActivateRequest) {
    return { license: toLicenseResponse(await this.licensing.activate(body)) };
  }
}
