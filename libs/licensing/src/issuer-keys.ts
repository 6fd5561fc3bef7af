import { Injectable } from '@nestjs/common';
import { AppConfig } from '@ws/common';
import { IssuerKey, parseIssuerKeys } from './license-key';

/** The trusted issuer keys of LICENSE_PUBLIC_KEYS, parsed once at boot: a bad entry stops the process, naming it. */
@Injectable()
export class IssuerKeys {
  readonly keys: readonly IssuerKey[];

  constructor(config: AppConfig) {
    this.keys = parseIssuerKeys(config.LICENSE_PUBLIC_KEYS);
  }
}
