/**
 * A second Docker engine on this machine for the multi-host suites (issue 24, point 1): its own data root, exec
 * root, pid file, default bridge (made here with `ip link`, an address range of its own), `--iptables=false` and
 * overlay2 like the first (scripts/ensure-docker.sh), listening on a loopback TCP port with mutual TLS (a CA, a
 * server and a client certificate made here with openssl, `--tlsverify`). Both engines share this machine's network
 * namespace, so the second one names its isolated workspace bridge otherwise (engine label
 * workspace-server.isolated-bridge, which the agent reads) and the firewall script installs its rules for that bridge.
 * It starts with no image: the suites put images on it through the service (`image distribute`).
 * `stop()` removes everything it made (process, mounts, directories, bridges, firewall chains, certificates).
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DockerHost } from '@ws/agent';
import { freePort, waitFor } from './harness';

export interface SecondEngineOptions {
  /** A short tag (≤ 4 characters) that keeps interface names unique when several suites run one each. */
  tag?: string;
}

/** The firewall script, from test/e2e under jest and from dist/test/e2e when a compiled bench starts the engine. */
const FIREWALL_SCRIPT = ['../../scripts', '../../../scripts'].map((dir) => resolve(__dirname, dir, 'workspace-firewall.sh')).find((path) => existsSync(path)) ?? resolve(__dirname, '../../scripts/workspace-firewall.sh');

const run = (cmd: string, args: string[], env: Record<string, string> = {}) =>
  execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env }, timeout: 60_000 }).toString();
const quietly = (fn: () => unknown) => {
  try {
    fn();
  } catch {
    /* cleanup goes on */
  }
};

function linkExists(name: string): boolean {
  try {
    run('ip', ['link', 'show', name]);
    return true;
  } catch {
    return false;
  }
}

export class SecondEngine {
  private process: ChildProcess | null = null;
  /** The first engine's interfaces when this one started: it must never remove them (checked after each boot). */
  private firstEngineLinks: string[] = [];
  private exited: Promise<void> = Promise.resolve();

  private constructor(
    readonly dir: string,
    readonly port: number,
    /** The engine's default bridge (docker0's role) and its address range. */
    readonly bridge: string,
    readonly subnet: string,
    /** The isolated workspace bridge's interface name on this engine. */
    readonly isolatedBridge: string,
    readonly tls: { ca: string; cert: string; key: string },
  ) {}

  get endpoint(): string {
    return `tcp://127.0.0.1:${this.port}`;
  }

  /** The engine through the same client the service uses (mutual TLS). */
  host(): DockerHost {
    return DockerHost.fromEndpoint({ endpoint: this.endpoint, tlsCaPath: this.tls.ca, tlsCertPath: this.tls.cert, tlsKeyPath: this.tls.key, name: 'second-engine' });
  }

  /** Makes the certificates and bridge, starts dockerd and installs the firewall; bounded by `timeoutMs`. */
  static async start(options: SecondEngineOptions = {}, timeoutMs = 90_000): Promise<SecondEngine> {
    const tag = (options.tag ?? String(process.pid % 10_000)).slice(0, 4);
    // Short paths: containerd's socket lives under the exec root (a unix socket path is at most 107 bytes).
    const dir = mkdtempSync('/tmp/wse2-');
    const octet = 100 + (process.pid % 100);
    const engine = new SecondEngine(dir, await freePort(), `wse2b${tag}`, `10.213.${octet}.1/24`, `wse2i${tag}`, {
      ca: join(dir, 'ca.pem'), cert: join(dir, 'client-cert.pem'), key: join(dir, 'client-key.pem'),
    });
    engine.firstEngineLinks = ['docker0', 'ws-isolated'].filter(linkExists);
    try {
      engine.makeCertificates();
      engine.makeBridge();
      await engine.boot(timeoutMs);
      engine.installFirewall();
      return engine;
    } catch (err) {
      await engine.stop();
      throw err;
    }
  }

  private makeCertificates(): void {
    const d = this.dir;
    const ssl = (...args: string[]) => run('openssl', args);
    ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=second-engine test CA', '-keyout', join(d, 'ca-key.pem'), '-out', join(d, 'ca.pem'));
    const sign = (name: string, subject: string, ext: string) => {
      ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', subject, '-keyout', join(d, `${name}-key.pem`), '-out', join(d, `${name}.csr`));
      writeFileSync(join(d, `${name}.ext`), ext);
      ssl('x509', '-req', '-in', join(d, `${name}.csr`), '-CA', join(d, 'ca.pem'), '-CAkey', join(d, 'ca-key.pem'), '-CAcreateserial', '-days', '1', '-extfile', join(d, `${name}.ext`), '-out', join(d, `${name}-cert.pem`));
    };
    sign('server', '/CN=127.0.0.1', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
    sign('client', '/CN=workspace-server', 'extendedKeyUsage=clientAuth\n');
  }

  private makeBridge(): void {
    quietly(() => run('ip', ['link', 'del', this.bridge])); // a leftover of a killed run
    run('ip', ['link', 'add', this.bridge, 'type', 'bridge']);
    run('ip', ['addr', 'add', this.subnet, 'dev', this.bridge]);
    run('ip', ['link', 'set', this.bridge, 'up']);
  }

  private async boot(timeoutMs: number): Promise<void> {
    const d = this.dir;
    const log = openSync(join(d, 'dockerd.log'), 'a');
    const child = spawn('dockerd', [
      '--data-root', join(d, 'data'), '--exec-root', join(d, 'exec'), '--pidfile', join(d, 'dockerd.pid'),
      '--bridge', this.bridge, '--iptables=false', '--storage-driver=overlay2',
      // No --default-address-pool: with it, a restart (halt/resume) makes dockerd delete the interface named
      // docker0 (Docker's removeDefaultBridgeInterface), which is the FIRST engine's. Networks it makes take free
      // ranges from the default pools, skipping the ones this machine's routes already use.
      '--label', `workspace-server.isolated-bridge=${this.isolatedBridge}`,
      '-H', `tcp://127.0.0.1:${this.port}`, '--tlsverify', '--tlscacert', join(d, 'ca.pem'), '--tlscert', join(d, 'server-cert.pem'), '--tlskey', join(d, 'server-key.pem'),
    ], { stdio: ['ignore', log, log], detached: false });
    this.process = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    const host = this.host();
    await waitFor('the second engine answers', async () => {
      if (child.exitCode !== null) throw new Error(`dockerd exited (${child.exitCode}): ${readFileSync(join(d, 'dockerd.log'), 'utf8').slice(-2000)}`);
      return (await host.ping(2_000).catch(() => false)) || undefined;
    }, timeoutMs, 200);
    const lost = this.firstEngineLinks.filter((link) => !linkExists(link));
    if (lost.length) throw new Error(`the second engine removed the first engine's interface(s) ${lost.join(', ')}`);
  }

  /** Firewall rules for this engine's isolated bridge (the same script the first engine gets). */
  installFirewall(): void {
    run(FIREWALL_SCRIPT, [], { WS_ISOLATED_BRIDGE: this.isolatedBridge });
  }

  /** Stops the engine (as a host going away); `resume()` starts it again on the same data root. */
  async halt(timeoutMs = 30_000): Promise<void> {
    const child = this.process;
    if (!child || child.exitCode !== null) return;
    child.kill('SIGTERM');
    const killed = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    await this.exited;
    clearTimeout(killed);
    this.process = null;
  }

  async resume(timeoutMs = 90_000): Promise<void> {
    await this.boot(timeoutMs);
  }

  /** Removes everything start() made; safe to call twice and after a failed start. */
  async stop(): Promise<void> {
    // Its containers first, so no shim keeps a mount busy.
    if (this.process && this.process.exitCode === null) {
      await this.host().docker.listContainers({ all: true }).then(
        (all) => Promise.all(all.map((c) => this.host().docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined))),
        () => undefined,
      );
    }
    await this.halt(20_000);
    const mounts = readFileSync('/proc/self/mounts', 'utf8').split('\n').map((line) => line.split(' ')[1] ?? '').filter((m) => m.startsWith(`${this.dir}/`));
    for (const mount of mounts.sort().reverse()) quietly(() => run('umount', ['-l', mount]));
    for (const link of [this.isolatedBridge, this.bridge]) quietly(() => run('ip', ['link', 'del', link]));
    for (const cmd of ['iptables', 'ip6tables']) {
      for (const [parent, chain] of [['INPUT', `WS-ISO-IN-${this.isolatedBridge}`], ['FORWARD', `WS-ISO-FWD-${this.isolatedBridge}`], ['DOCKER-USER', `WS-ISO-FWD-${this.isolatedBridge}`]]) {
        quietly(() => run(cmd, ['-D', parent, '-i', this.isolatedBridge, '-j', chain]));
      }
      for (const chain of [`WS-ISO-IN-${this.isolatedBridge}`, `WS-ISO-FWD-${this.isolatedBridge}`]) {
        quietly(() => run(cmd, ['-F', chain]));
        quietly(() => run(cmd, ['-X', chain]));
      }
    }
    quietly(() => rmSync(this.dir, { recursive: true, force: true }));
  }
}
