import { Command } from 'commander';
import { toWireId } from '@ws/common';
import { LOCAL_SERVER, ServersService } from '@ws/servers';
import { DEFAULT_ZONE, toZoneResponse, ZonesService } from '@ws/zones';
import { bytes, num, print, service } from '../context';

/** Zones and servers (Docker hosts). */
export function registerInfrastructureCommands(program: Command): void {
  const zone = program.command('zone').description('deployment zones');
  zone.command('list').option('--json').action(async (o: { json?: boolean }) => print((await (await service(ZonesService)).list()).map((z) => toZoneResponse(z, true)), o.json ?? false));
  zone.command('add <name>').action(async (name: string) => print(toZoneResponse(await (await service(ZonesService)).ensure(name), true), false));
  zone.command('remove <zone>').action(async (ref: string) => {
    await (await service(ZonesService)).remove(ref);
    console.log(`removed zone ${ref}`);
  });

  const server = program.command('server').description('Docker hosts that run workspaces');
  server
    .command('add <hostname>')
    .description('add or update a Docker host')
    .requiredOption('--endpoint <url>', 'unix:///var/run/docker.sock, tcp://host:2376 or ssh://user@host')
    .option('--zone <zone>', 'zone name or id', DEFAULT_ZONE)
    .option('--publish-host <address>', 'address the api reaches published ports at', '127.0.0.1')
    .option('--cores <n>', 'cores to offer (default: what Docker reports)', num)
    .option('--memory <size>', 'memory to offer, e.g. 16G (default: what Docker reports)', bytes)
    .option('--tls-ca <path>')
    .option('--tls-cert <path>')
    .option('--tls-key <path>')
    .option('--disabled', 'take no new workspaces')
    .option('--json')
    .action(async (hostname: string, o: { endpoint: string; zone: string; publishHost: string; cores?: number; memory?: number; tlsCa?: string; tlsCert?: string; tlsKey?: string; disabled?: boolean; json?: boolean }) => {
      const zones = await service(ZonesService);
      const zoneRow = o.zone === DEFAULT_ZONE ? await zones.ensure(DEFAULT_ZONE) : await zones.findByRef(o.zone);
      const s = await (await service(ServersService)).upsert({
        hostname, dockerEndpoint: o.endpoint, zone: zoneRow, publishHost: o.publishHost, cores: o.cores, memory: o.memory,
        tlsCaPath: o.tlsCa, tlsCertPath: o.tlsCert, tlsKeyPath: o.tlsKey, enabled: !o.disabled,
      });
      print({ server_id: toWireId(s.id), hostname: s.hostname, endpoint: s.dockerEndpoint, zone: s.zone?.name, cores: s.cores, memory: s.memory, enabled: s.enabled }, o.json ?? false);
    });
  server
    .command('ensure-local')
    .description('register the local Docker socket in the default zone (npm start does this)')
    .action(async () => {
      const zoneRow = await (await service(ZonesService)).ensure(DEFAULT_ZONE);
      const servers = await service(ServersService);
      const existing = (await servers.list()).find((s) => s.hostname === LOCAL_SERVER.hostname);
      const s = existing ?? (await servers.upsert({ ...LOCAL_SERVER, zone: zoneRow }));
      console.log(`server ${s.hostname}: ${s.cores} cores, ${Math.round(s.memory / 1024 ** 3)} GiB`);
    });
  server.command('list').option('--json').action(async (o: { json?: boolean }) => {
    const rows = await (await service(ServersService)).list();
    print(rows.map((s) => ({ server_id: toWireId(s.id), hostname: s.hostname, endpoint: s.dockerEndpoint, zone: s.zone?.name, cores: s.cores, memory: s.memory, enabled: s.enabled })), o.json ?? false);
  });
  server.command('remove <server>').action(async (ref: string) => {
    await (await service(ServersService)).remove(ref);
    console.log(`removed server ${ref}`);
  });
}
