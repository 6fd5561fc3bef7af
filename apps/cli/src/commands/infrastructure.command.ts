import { Command } from 'commander';
import { toWireId } from '@ws/common';
import { LOCAL_SERVER, Server, ServersService } from '@ws/servers';
import { DEFAULT_ZONE, toZoneResponse, ZonesService } from '@ws/zones';
import { bytes, num, print, service } from '../context';

const serverRow = (s: Server) => ({
  server_id: toWireId(s.id), hostname: s.hostname, endpoint: s.dockerEndpoint, zone: s.zone?.name, cores: s.cores, memory: s.memory,
  cpu_overcommit: s.cpuOvercommit, memory_overcommit: s.memoryOvercommit, cpu_allocation_method: s.cpuAllocationMethod, enabled: s.enabled,
});

interface CapacityOptions { cores?: number; memory?: number; cpuOvercommit?: number; memoryOvercommit?: number; cpuAllocationMethod?: string }

/** The capacity options `server add` and `server update` share. */
function capacityOptions(command: Command, defaults: string): Command {
  return command
    .option('--cores <n>', `cores to offer before overcommit (${defaults}: what Docker reports)`, num)
    .option('--memory <size>', `memory to offer before overcommit, e.g. 16G (${defaults}: what Docker reports)`, bytes)
    .option('--cpu-overcommit <factor>', 'placement offers cores × this (default 4; each workspace keeps its own CPU limit)', num)
    .option('--memory-overcommit <factor>', 'placement offers memory × this (default 1)', num)
    .option('--cpu-allocation-method <method>', 'Quotas (hard limit, default) or Shares (proportional) for images that say Inherit');
}

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
  capacityOptions(
    server
      .command('add <hostname>')
      .description('add or update a Docker host')
      .requiredOption('--endpoint <url>', 'unix:///var/run/docker.sock, tcp://host:2376 or ssh://user@host')
      .option('--zone <zone>', 'zone name or id', DEFAULT_ZONE)
      .option('--publish-host <address>', 'address the api reaches published ports at', '127.0.0.1'),
    'default',
  )
    .option('--tls-ca <path>')
    .option('--tls-cert <path>')
    .option('--tls-key <path>')
    .option('--disabled', 'take no new workspaces')
    .option('--json')
    .action(async (hostname: string, o: CapacityOptions & { endpoint: string; zone: string; publishHost: string; tlsCa?: string; tlsCert?: string; tlsKey?: string; disabled?: boolean; json?: boolean }) => {
      const zones = await service(ZonesService);
      const zoneRow = o.zone === DEFAULT_ZONE ? await zones.ensure(DEFAULT_ZONE) : await zones.findByRef(o.zone);
      const s = await (await service(ServersService)).upsert({
        hostname, dockerEndpoint: o.endpoint, zone: zoneRow, publishHost: o.publishHost, cores: o.cores, memory: o.memory,
        tlsCaPath: o.tlsCa, tlsCertPath: o.tlsCert, tlsKeyPath: o.tlsKey, enabled: !o.disabled,
        cpuOvercommit: o.cpuOvercommit, memoryOvercommit: o.memoryOvercommit, cpuAllocationMethod: o.cpuAllocationMethod,
      });
      print(serverRow(s), o.json ?? false);
    });
  capacityOptions(server.command('update <server>').description('change capacity, overcommit, CPU allocation or enabled of a registered server (by hostname or id)'), 'unchanged')
    .option('--enabled', 'take new workspaces')
    .option('--disabled', 'take no new workspaces')
    .option('--json')
    .action(async (ref: string, o: CapacityOptions & { enabled?: boolean; disabled?: boolean; json?: boolean }) => {
      if (o.enabled && o.disabled) throw new Error('give --enabled or --disabled, not both');
      const s = await (await service(ServersService)).update(ref, {
        cores: o.cores, memory: o.memory, cpuOvercommit: o.cpuOvercommit, memoryOvercommit: o.memoryOvercommit, cpuAllocationMethod: o.cpuAllocationMethod,
        enabled: o.enabled ? true : o.disabled ? false : undefined,
      });
      print(serverRow(s), o.json ?? false);
    });
  server
    .command('ensure-local')
    .description('register the local Docker socket in the default zone (npm start does this)')
    .action(async () => {
      const zoneRow = await (await service(ZonesService)).ensure(DEFAULT_ZONE);
      const servers = await service(ServersService);
      const existing = (await servers.list()).find((s) => s.hostname === LOCAL_SERVER.hostname);
      const s = existing ?? (await servers.upsert({ ...LOCAL_SERVER, zone: zoneRow }));
      console.log(`server ${s.hostname}: ${s.cores} cores × ${s.cpuOvercommit}, ${Math.round(s.memory / 1024 ** 3)} GiB × ${s.memoryOvercommit} (server update ${s.hostname} --cpu-overcommit … changes it)`);
    });
  server.command('list').option('--json').action(async (o: { json?: boolean }) => {
    const rows = await (await service(ServersService)).list();
    print(rows.map(serverRow), o.json ?? false);
  });
  server.command('remove <server>').action(async (ref: string) => {
    await (await service(ServersService)).remove(ref);
    console.log(`removed server ${ref}`);
  });
}
