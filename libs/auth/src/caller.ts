import type { Permission } from './permissions';

/** Who is calling: the API key a request authenticated with. */
export interface Caller {
  apiKeyId: string;
  apiKey: string;
  name: string;
  permissions: ReadonlySet<Permission>;
  readOnly: boolean;
}
