import { Body, Controller } from '@nestjs/common';
import { Caller, CurrentCaller, Operation } from '@ws/auth';
import { DeleteEgressCredentialRequest, EgressCredentials, toEgressCredentialResponse, UpdateEgressCredentialRequest } from '@ws/egress';

@Controller('api/public')
export class EgressController {
  constructor(private readonly credentials: EgressCredentials) {}

  /** Creates the credential without egress_credential_id, else changes it; answers the one credential. */
  @Operation('update_egress_credential')
  async update(@Body() body: UpdateEgressCredentialRequest, @CurrentCaller() caller: Caller) {
    return { egress_credentials: [toEgressCredentialResponse(await this.credentials.upsert(caller, body.target_egress_credential))] };
  }

  @Operation('delete_egress_provider_mapping')
  async delete(@Body() body: DeleteEgressCredentialRequest, @CurrentCaller() caller: Caller) {
    await this.credentials.delete(caller, body.target_egress_credential);
    return {};
  }
}
