import { Command } from 'commander';
import type { Caller } from '@ws/auth';
import { toWireId } from '@ws/common';
import {
  EGRESS_PROVIDER_TYPES, EgressCatalog, EgressCredentialChanges, EgressCredentials, EgressGateway, REQUIRED_CREDENTIAL_FIELDS, toEgressCredentialResponse, toEgressProviderResponse,
} from '@ws/egress';
import { collect, int, print, readStdin, service } from '../context';

/** The operator at the console holds every permission; the API's conditional checks are for API keys. */
const OPERATOR: Caller = { apiKeyId: '', apiKey: 'cli', name: 'operator CLI', permissions: new Set(['Global Admin']), readOnly: false };

const gatewayRow = (g: EgressGateway) => ({
  egress_gateway_id: toWireId(g.id), name: g.name, egress_provider: g.provider?.name, endpoint: g.endpoint, config: g.config,
});

function jsonObject(value: string): Record<string, unknown> {
  const parsed: unknown = JSON.parse(value);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('--config must be a JSON object');
  return parsed as Record<string, unknown>;
}

interface CredentialOptions {
  provider: string; name: string; user?: string; group?: string; image?: string; username?: string; secretStdin?: boolean; allGateways?: boolean; gateway: string[]; limit?: number; disabled?: boolean; showSecrets?: boolean; json?: boolean;
}

/** Egress providers, their gateways, and credentials (attached to one user, group or image). */
export function registerEgressCommands(program: Command): void {
  const egress = program.command('egress').description('egress providers, gateways and credentials (workspace traffic through a VPN or tunnel)');

  const provider = egress.command('provider').description('egress providers');
  provider
    .command('add <name>')
    .requiredOption('--type <type>', `one of ${EGRESS_PROVIDER_TYPES.join(', ')}`)
    .option('--json')
    .action(async (name: string, o: { type: string; json?: boolean }) => print(toEgressProviderResponse(await (await service(EgressCatalog)).createProvider(name, o.type)), o.json ?? false));
  provider.command('list').option('--json').action(async (o: { json?: boolean }) => print((await (await service(EgressCatalog)).listProviders()).map(toEgressProviderResponse), o.json ?? false));
  provider
    .command('remove <provider>')
    .description('remove a provider (by name or id) with its gateways and credentials; refused while a workspace uses one')
    .action(async (ref: string) => {
      await (await service(EgressCatalog)).removeProvider(ref);
      console.log(`removed egress provider ${ref}`);
    });

  const gateway = egress.command('gateway').description('gateways of egress providers');
  gateway
    .command('add <provider> <name>')
    .option('--endpoint <endpoint>', 'where the container connects (host:port, url, peer address)', '')
    .option('--config <json>', 'provider-specific settings handed to the container, a JSON object', jsonObject)
    .option('--json')
    .action(async (providerRef: string, name: string, o: { endpoint: string; config?: Record<string, unknown>; json?: boolean }) => {
      print(gatewayRow(await (await service(EgressCatalog)).createGateway(providerRef, { name, endpoint: o.endpoint, config: o.config })), o.json ?? false);
    });
  gateway
    .command('list')
    .option('--provider <provider>', 'only this provider\'s gateways')
    .option('--json')
    .action(async (o: { provider?: string; json?: boolean }) => print((await (await service(EgressCatalog)).listGateways(o.provider)).map(gatewayRow), o.json ?? false));
  gateway
    .command('remove <gateway>')
    .option('--provider <provider>', 'the provider, when two have a gateway of that name')
    .action(async (ref: string, o: { provider?: string }) => {
      await (await service(EgressCatalog)).removeGateway(ref, o.provider);
      console.log(`removed egress gateway ${ref}`);
    });

  const credential = egress.command('credential').description('egress credentials');
  credential
    .command('add')
    .description('add a credential, attached to exactly one of --user, --group, --image')
    .requiredOption('--provider <provider>', 'provider name or id')
    .requiredOption('--name <name>')
    .option('--user <user>', 'username or id')
    .option('--group <group>', 'group name or id')
    .option('--image <image>', 'image friendly name or id')
    .option('--username <username>')
    .option('--secret-stdin', 'read the secret from stdin: the password (username_password_vpn), VPN private key (key_pair_tunnel), mesh key (mesh_network) or custom credential (custom)')
    .option('--all-gateways', 'allow every gateway of the provider')
    .option('--gateway <gateway>', 'a gateway it may use (name or id; repeat)', collect, [])
    .option('--limit <n>', 'at most this many workspaces use it at once', int)
    .option('--disabled')
    .option('--show-secrets', 'print the secrets in clear')
    .option('--json')
    .action(async (o: CredentialOptions) => {
      const catalog = await service(EgressCatalog);
      const owners = (['user', 'group', 'image'] as const).filter((k) => o[k] !== undefined);
      if (owners.length !== 1) throw new Error('give exactly one of --user, --group, --image');
      const providerRow = await catalog.findProvider(o.provider);
      const gatewayIds = await Promise.all(o.gateway.map(async (ref) => toWireId((await catalog.findGateway(ref, providerRow.id)).id)));
      const ownerId = toWireId(await catalog.ownerId(owners[0], o[owners[0]] as string));
      // Secrets come from stdin only: a command-line argument shows in ps and the shell's history.
      const secretField = REQUIRED_CREDENTIAL_FIELDS[providerRow.type].find((field) => field !== 'username');
      const secret = o.secretStdin && secretField ? { [secretField]: await readStdin() } : {};
      const changes: EgressCredentialChanges = {
        egress_provider_id: toWireId(providerRow.id), name: o.name, enabled: !o.disabled, allow_all_gateways: o.allGateways ?? false,
        selected_gateways: gatewayIds, limit_active_connections: o.limit !== undefined, active_connection_limit: o.limit,
        username: o.username, ...secret,
        [`${owners[0]}_id`]: ownerId,
      };
      const credentials = await service(EgressCredentials);
      const view = await credentials.upsert(OPERATOR, changes);
      print(toEgressCredentialResponse(o.showSecrets ? credentials.reveal(view) : view, { showSecrets: o.showSecrets }), o.json ?? false);
    });
  credential
    .command('list')
    .description('credentials as update_egress_credential answers them (secrets masked unless --show-secrets)')
    .option('--show-secrets', 'print the secrets in clear (decrypted with SERVER_CREDENTIALS_KEY)')
    .option('--json')
    .action(async (o: { showSecrets?: boolean; json?: boolean }) => {
      const credentials = await service(EgressCredentials);
      const views = await credentials.list();
      print(views.map((v) => toEgressCredentialResponse(o.showSecrets ? credentials.reveal(v) : v, { showSecrets: o.showSecrets })), o.json ?? false);
    });
  credential
    .command('remove <credential>')
    .description('remove a credential by id; refused while a workspace uses it')
    .action(async (id: string) => {
      await (await service(EgressCredentials)).delete(OPERATOR, { egress_credential_id: id });
      console.log(`removed egress credential ${id}`);
    });
}
