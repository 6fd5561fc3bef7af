import { Command } from 'commander';
import { ServerImagesService, toImageResponse } from '@ws/images';
import { int, print, readStdin, service } from '../context';

interface ServerImageOptions {
  protocol: string; host: string; port?: number; username?: string; domain?: string; passwordStdin?: boolean; noPassword?: boolean;
  allowOverride?: string[]; rdpClient?: string; description?: string; thumbnail?: string; xRes?: number; yRes?: number; disabled?: boolean; json?: boolean;
}

/** `image add-server`: an image that reaches an existing RDP, VNC or SSH server (issue 14). */
export function registerServerImageCommand(image: Command): void {
  image
    .command('add-server <friendly-name>')
    .description('add or update (by friendly name) a server image: an existing RDP, VNC or SSH server instead of a container')
    .requiredOption('--protocol <protocol>', 'rdp, vnc or ssh')
    .requiredOption('--host <host>', 'host name or IP address of the server')
    .option('--port <port>', 'port (default: 3389 rdp, 5900 vnc, 22 ssh)', int)
    .option('--username <template>', 'user name; {username} becomes the requesting user\'s name')
    .option('--domain <domain>', 'RDP domain')
    .option('--password-stdin', 'read the server password from stdin (stored encrypted with SERVER_CREDENTIALS_KEY)')
    .option('--no-password', 'remove a stored password')
    .option('--allow-override <fields>', 'connection_info fields a request may override: host,port,username,password,domain', (v: string, prev: string[] = []) => [...prev, ...v.split(',').map((f) => f.trim()).filter(Boolean)])
    .option('--rdp-client <option>', 'rdp only: guac (web native, default), rdp_client (the user\'s RDP client) or user (the request chooses)')
    .option('--description <text>')
    .option('--thumbnail <url>')
    .option('--x-res <px>', 'desktop width', int)
    .option('--y-res <px>', 'desktop height', int)
    .option('--disabled')
    .option('--json')
    .action(async (friendlyName: string, o: ServerImageOptions & { password?: boolean }) => {
      // commander turns --no-password into password: false; a password is only ever read from stdin.
      const password = o.passwordStdin ? await readStdin() : o.password === false ? '' : undefined;
      if (o.passwordStdin && o.password === false) throw new Error('give --password-stdin or --no-password, not both');
      const saved = await (await service(ServerImagesService)).upsert({
        friendlyName, protocol: o.protocol, host: o.host, port: o.port, usernameTemplate: o.username, domain: o.domain, password,
        allowOverride: o.allowOverride, rdpClient: o.rdpClient, description: o.description, imageSrc: o.thumbnail, xRes: o.xRes, yRes: o.yRes,
        enabled: o.disabled ? false : undefined,
      });
      const { image_id: imageId } = toImageResponse(saved.image);
      const summary = {
        image_id: imageId, friendly_name: saved.image.friendlyName, kind: 'server', protocol: saved.target.protocol, host: saved.target.host, port: saved.target.port,
        username: saved.target.usernameTemplate, allow_override: saved.target.allowOverride, rdp_client: saved.target.rdpClient, password_stored: saved.hasPassword,
      };
      print(summary, o.json ?? false);
    });
}
