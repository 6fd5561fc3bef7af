import { Command } from 'commander';
import { ImagesService, toImageResponse } from '@ws/images';
import { DistributionProgress, ImageDistribution, ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { bytes, collect, int, num, print, service } from '../context';
import { registerServerImageCommand } from './server-image.command';

interface ImageOptions {
  friendlyName: string; description?: string; thumbnail?: string; cores: number; memory: number; xRes: number; yRes: number;
  port: string[]; env: string[]; cmd?: string; goCmd?: string; browser?: boolean; disabled?: boolean; zone?: string; server?: string;
  persistentProfilePath?: string; runConfig?: Record<string, unknown>; volumeMappings?: Record<string, unknown>; cpuAllocationMethod?: string; json?: boolean;
  selectableNetwork?: string[];
}

/** A JSON object option (--run-config, --volume-mappings). */
const jsonObject = (value: string): Record<string, unknown> => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new Error(`not JSON: ${value}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error(`not a JSON object: ${value}`);
  return parsed as Record<string, unknown>;
};

/** Launch-setting options `image add` and `image update` share (README "Image launch settings"). */
function launchSettingOptions(command: Command): Command {
  return command
    .option('--run-config <json>', 'docker run options: {"hostname", "shm_size", "devices", "add_host", "security_opt"}', jsonObject)
    .option('--volume-mappings <json>', '{"/host/path/{user_id}": {"bind": "/container/path", "mode": "rw"}} or a volume name as the key', jsonObject)
    .option('--cpu-allocation-method <method>', 'Inherit (the server\'s, default), Quotas (hard limit) or Shares (proportional)')
    .option('--selectable-network <name>', 'a Docker network a cast link\'s visitor may choose (container_network; repeat)', collect);
}

const pairs = (values: string[], what: string) =>
  Object.fromEntries(values.map((v) => {
    const at = v.indexOf('=');
    if (at < 1) throw new Error(`${what} must be name=value (got ${v})`);
    return [v.slice(0, at), v.slice(at + 1)];
  }));

/** Progress of a copy on stderr: one line a second per target, and one when it ends. */
export const progressLine = (p: DistributionProgress) =>
  process.stderr.write(`${p.done ? 'copied' : 'copying'} ${p.image} ${p.from} → ${p.to}: ${(p.bytes / 1024 ** 2).toFixed(1)} MiB\n`);

/** Copies an image onto servers and prints what happened (image distribute, image add --distribute, server add --copy-images). */
export async function distributeImage(reference: string, servers: string[] = []): Promise<{ image: string; source: string; copied: string[]; present: string[] }> {
  return (await service(ImageDistribution)).distribute(reference, servers, progressLine);
}

export function registerImageCommands(program: Command): void {
  const image = program.command('image').description('workspace images');
  launchSettingOptions(image
    .command('add <reference>'))
    .description('add or update (by friendly name) an image; reference is a local container image, e.g. workspace-server/desktop:<hash>')
    .requiredOption('--friendly-name <name>')
    .option('--description <text>')
    .option('--thumbnail <url>')
    .option('--cores <n>', 'cores (hard limit)', num, 1)
    .option('--memory <size>', 'memory (hard limit), e.g. 2G', bytes, 2 * 1024 ** 3)
    .option('--x-res <px>', 'desktop width', int, 1280)
    .option('--y-res <px>', 'desktop height', int, 720)
    .option('--port <name=port/tcp>', 'port map entry (repeat), e.g. vnc=5900/tcp', collect, [])
    .option('--env <NAME=value>', 'first-launch environment (repeat)', collect, [])
    .option('--cmd <command>', 'exec_config.first_launch.cmd')
    .option('--go-cmd <command>', 'exec_config.go.cmd')
    .option('--browser', 'a browser image: request_workspace workspace_url becomes WORKSPACE_URL')
    .option('--disabled')
    .option('--zone <zone>', 'restrict to a zone')
    .option('--server <server>', 'restrict to a server')
    .option('--persistent-profile-path <url>')
    .option('--distribute', 'copy the container image from a server that holds it to every other enabled server that answers (image distribute)')
    .option('--json')
    .action(async (reference: string, o: ImageOptions & { distribute?: boolean }) => {
      const zone = o.zone ? await (await service(ZonesService)).findByRef(o.zone) : null;
      const server = o.server ? await (await service(ServersService)).findByRef(o.server) : null;
      const saved = await (await service(ImagesService)).upsert({
        name: reference, friendlyName: o.friendlyName, description: o.description, imageSrc: o.thumbnail, cores: o.cores, memory: o.memory, xRes: o.xRes, yRes: o.yRes,
        portMap: o.port.length ? pairs(o.port, '--port') : { vnc: '5900/tcp' },
        execConfig: { first_launch: { environment: pairs(o.env, '--env'), cmd: o.cmd ?? '' }, go: { cmd: o.goCmd ?? '' } },
        isBrowser: o.browser ?? false, enabled: !o.disabled, restrictToZone: !!zone, zoneId: zone?.id ?? null, restrictToServer: !!server, serverId: server?.id ?? null,
        persistentProfilePath: o.persistentProfilePath ?? null, runConfig: o.runConfig ?? {}, volumeMappings: o.volumeMappings ?? {}, cpuAllocationMethod: o.cpuAllocationMethod ?? 'Inherit',
        selectableNetworks: o.selectableNetwork ?? [],
      });
      if (o.distribute) await distributeImage(reference, server ? [server.hostname] : []);
      print(o.json ? toImageResponse(saved) : { image_id: toImageResponse(saved).image_id, name: saved.name, friendly_name: saved.friendlyName }, o.json ?? false);
    });
  launchSettingOptions(image.command('update <image>').description('change only the given settings of an image (by id or friendly name)'))
    .option('--reference <reference>', 'container image reference')
    .option('--cores <n>', 'cores (hard limit)', num)
    .option('--memory <size>', 'memory (hard limit), e.g. 2G', bytes)
    .option('--cmd <command>', 'exec_config.first_launch.cmd (keeps the first-launch environment)')
    .option('--go-cmd <command>', 'exec_config.go.cmd')
    .option('--enabled')
    .option('--disabled')
    .option('--network-name <name>', 'the Docker network (which must exist on the servers) a restricted image\'s containers join')
    .option('--restrict-to-network', 'containers join --network-name instead of the isolated workspace network')
    .option('--no-restrict-to-network', 'containers join the isolated workspace network again')
    .option('--json')
    .action(async (ref: string, o: Partial<ImageOptions> & { reference?: string; enabled?: boolean; networkName?: string; restrictToNetwork?: boolean }) => {
      if (o.enabled && o.disabled) throw new Error('give --enabled or --disabled, not both');
      const images = await service(ImagesService);
      const current = await images.findByRef(ref);
      const execConfig = o.cmd !== undefined || o.goCmd !== undefined
        ? { first_launch: { environment: current.execConfig.first_launch?.environment ?? {}, cmd: o.cmd ?? current.execConfig.first_launch?.cmd ?? '' }, go: { cmd: o.goCmd ?? current.execConfig.go?.cmd ?? '' } }
        : undefined;
      const saved = await images.update(ref, {
        name: o.reference, cores: o.cores, memory: o.memory, runConfig: o.runConfig, volumeMappings: o.volumeMappings, cpuAllocationMethod: o.cpuAllocationMethod, execConfig,
        selectableNetworks: o.selectableNetwork, enabled: o.enabled ? true : o.disabled ? false : undefined,
        restrictToNetwork: o.restrictToNetwork, networkName: o.networkName,
      });
      print(o.json ? toImageResponse(saved) : { image_id: toImageResponse(saved).image_id, name: saved.name, friendly_name: saved.friendlyName }, o.json ?? false);
    });
  image
    .command('distribute <reference>')
    .description('copy a container image from a server that holds it to others through the Docker API (docker save → docker load, no registry); progress on stderr')
    .option('--server <server>', 'a target server by hostname or id (repeat; default every enabled server that answers)', collect, [])
    .option('--json')
    .action(async (reference: string, o: { server: string[]; json?: boolean }) => {
      print(await distributeImage(reference, o.server), o.json ?? false);
    });
  registerServerImageCommand(image);
  image.command('list').option('--json').action(async (o: { json?: boolean }) => {
    const rows = await (await service(ImagesService)).list();
    print(rows.map((i) => { const r = toImageResponse(i); return o.json ? r : { image_id: r.image_id, friendly_name: r.friendly_name, name: r.name, cores: r.cores, memory: r.memory, enabled: r.enabled }; }), o.json ?? false);
  });
  image.command('remove <image>').description('by id or friendly name').action(async (ref: string) => {
    const outcome = await (await service(ImagesService)).remove(ref);
    console.log(outcome === 'removed' ? `removed image ${ref}` : `disabled image ${ref} instead of removing it: workspaces used it, and their history refers to it`);
  });
}
