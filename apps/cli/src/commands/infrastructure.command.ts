import { Command } from 'commander';
import { formatTimestamp, toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { LOCAL_SERVER, Server, ServerInventory, ServersService } from '@ws/servers';
import { ServerRetirement } from '@ws/workspaces';
import { DEFAULT_ZONE, toZoneResponse, Zone, ZoneChanges, ZonesService } from '@ws/zones';
import { bytes, num, print, service } from '../context';
import { distributeImage } from './image.command';

const serverRow = (s: Server) => ({
  server_id: toWireId(s.id), hostname: s.hostname, endpoint: s.dockerEndpoint, zone: s.zone?.name, cores: s.cores, memory: s.memory,
  cpu_overcommit: s.cpuOvercommit, memory_overcommit: s.memoryOvercommit, cpu_allocation_method: s.cpuAllocationMethod, enabled: s.enabled,
  health: s.health, health_reason: s.healthReason, health_checked_at: formatTimestamp(s.healthCheckedAt), down_since: formatTimestamp(s.downSince),
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

interface ZoneOptions {
  autoScaling?: boolean; cloud?: boolean; cloudRegion?: string; cloudAccessKeyId?: string; cloudSecretAccessKey?: string; cloudAgentImageId?: string;
  brief?: boolean; showSecrets?: boolean; json?: boolean;
}

/** Every settable field of a zone, shared by `zone add` and `zone set` (--no-auto-scaling / --no-cloud turn one off). */
function zoneOptions(command: Command): Command {
  return command
    .option('--auto-scaling', 'auto_scaling_enabled: true')
    .option('--no-auto-scaling', 'auto_scaling_enabled: false')
    .option('--cloud', 'cloud_enabled: true')
    .option('--no-cloud', 'cloud_enabled: false')
    .option('--cloud-region <region>', 'cloud_region, e.g. eu-west-1')
    .option('--cloud-access-key-id <id>', 'cloud_access_key_id')
    .option('--cloud-secret-access-key <secret>', 'cloud_secret_access_key (answered masked)')
    .option('--cloud-agent-image-id <id>', 'cloud_agent_image_id')
    .option('--show-secrets', 'print cloud_secret_access_key in clear')
    .option('--json');
}

const zoneChanges = (o: ZoneOptions): ZoneChanges => ({
  autoScalingEnabled: o.autoScaling, cloudEnabled: o.cloud, cloudRegion: o.cloudRegion, cloudAccessKeyId: o.cloudAccessKeyId,
  cloudSecretAccessKey: o.cloudSecretAccessKey, cloudAgentImageId: o.cloudAgentImageId,
});

const zoneRow = (z: Zone, o: { brief?: boolean; showSecrets?: boolean }) => {
  const row = toZoneResponse(z, o.brief ?? false);
  return o.showSecrets && !o.brief ? { ...row, cloud_secret_access_key: z.cloudSecretAccessKey } : row;
};

/** Zones and servers (Docker hosts). */
export function registerInfrastructureCommands(program: Command): void {
  const zone = program.command('zone').description('deployment zones');
  zone
    .command('list')
    .description('zones as get_zones answers them (secret masked unless --show-secrets)')
    .option('--brief', 'only id and name')
    .option('--show-secrets', 'print cloud_secret_access_key in clear')
    .option('--json')
    .action(async (o: { brief?: boolean; showSecrets?: boolean; json?: boolean }) => {
      const zones = await (await service(ZonesService)).list();
      print(zones.map((z) => zoneRow(z, o)), o.json ?? false);
    });
  zoneOptions(zone.command('add <name>').description('add a zone (or change the fields given of an existing one)')).action(async (name: string, o: ZoneOptions) => {
    const zones = await service(ZonesService);
    await zones.ensure(name);
    print(zoneRow(await zones.update(name, zoneChanges(o)), o), o.json ?? false);
  });
  zoneOptions(zone.command('set <zone>').description('change a zone\'s fields (zone by name or id); omitted ones keep their value'))
    .option('--name <name>', 'rename the zone')
    .action(async (ref: string, o: ZoneOptions & { name?: string }) => {
      print(zoneRow(await (await service(ZonesService)).update(ref, { ...zoneChanges(o), name: o.name }), o), o.json ?? false);
    });
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
    .option('--copy-images', 'copy every enabled container image of the catalog that it lacks onto it from a server that holds it')
    .option('--json')
    .action(async (hostname: string, o: CapacityOptions & { endpoint: string; zone: string; publishHost: string; tlsCa?: string; tlsCert?: string; tlsKey?: string; disabled?: boolean; copyImages?: boolean; json?: boolean }) => {
      const zones = await service(ZonesService);
      const zoneRow = o.zone === DEFAULT_ZONE ? await zones.ensure(DEFAULT_ZONE) : await zones.findByRef(o.zone);
      const s = await (await service(ServersService)).upsert({
        hostname, dockerEndpoint: o.endpoint, zone: zoneRow, publishHost: o.publishHost, cores: o.cores, memory: o.memory,
        tlsCaPath: o.tlsCa, tlsCertPath: o.tlsCert, tlsKeyPath: o.tlsKey, enabled: !o.disabled,
        cpuOvercommit: o.cpuOvercommit, memoryOvercommit: o.memoryOvercommit, cpuAllocationMethod: o.cpuAllocationMethod,
      });
      // What it holds now, so placement knows before the worker's next round.
      await (await service(ServerInventory)).refreshQuietly(s);
      if (o.copyImages) {
        const images = (await (await service(ImagesService)).list()).filter((i) => i.kind === 'container' && i.enabled);
        for (const name of [...new Set(images.map((i) => i.name))]) {
          const done = await distributeImage(name, [s.hostname]).catch((err: Error) => ({ error: err.message }));
          if ('error' in done) process.stderr.write(`image ${name} not copied to ${s.hostname}: ${done.error}\n`);
        }
      }
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
      // The images it built are known to placement before the first launch (the worker's health round keeps it current).
      await (await service(ServerInventory)).refreshQuietly(s);
      console.log(`server ${s.hostname}: ${s.cores} cores × ${s.cpuOvercommit}, ${Math.round(s.memory / 1024 ** 3)} GiB × ${s.memoryOvercommit} (server update ${s.hostname} --cpu-overcommit … changes it)`);
    });
  server.command('list').option('--json').action(async (o: { json?: boolean }) => {
    const rows = await (await service(ServersService)).list();
    print(rows.map(serverRow), o.json ?? false);
  });
  server.command('remove <server>').action(async (ref: string) => {
    await (await service(ServerRetirement)).remove(ref);
    console.log(`removed server ${ref}`);
  });
}
