/**
 * Issue 21 benchmark: what joining an egress gateway costs. Against a real WireGuard gateway of the bench's own
 * (test/e2e/egress-gateway.ts: containers and networks on this machine, nothing leaves it), interleaved in one run:
 *   - request_workspace → running with egress_gateway_id (sidecar, tunnel handshake, kill switch) against the same
 *     launch without it (same image, same network);
 *   - a download into the workspace through the tunnel (from the outside host, reachable only through the gateway)
 *     against the same download without it (from the canary on the workspace's own network).
 * No target: the figures say what the tunnel costs on this machine.
 */
import 'reflect-metadata';
import { desktopImage, post, registerLocalDesktop, startBenchApi, untilRunning } from './harness';
import { median, row } from './stats';
import { downloadBlobCommand, startEgressGateway } from '../test/e2e/egress-gateway';
import { egressImage } from '../test/e2e/harness';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const BLOB_MB = Number(process.env.BENCH_EGRESS_BLOB_MB ?? 64);

async function main(): Promise<void> {
  const gw = await startEgressGateway();
  const bench = await startBenchApi({ worker: true, kind: 'egress', settings: { EGRESS_IMAGE: egressImage() } });
  const { base } = bench;
  try {
    const image = desktopImage();
    const { image: img, auth } = await registerLocalDesktop(bench.api, {
      name: image, friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, portMap: { vnc: '5900/tcp' }, restrictToNetwork: true, networkName: gw.networkName,
    });
    const { EgressCatalog } = await import('@ws/egress');
    const { toWireId } = await import('@ws/common');
    const catalog = bench.api.get(EgressCatalog);
    const provider = await catalog.createProvider('wg-bench', 'key_pair_tunnel');
    const user = (await post(base, 'create_user', { ...auth, target_user: { username: 'egress-bench' } })).user as { user_id: string };
    const peers = [];
    for (let i = 0; i < ROUNDS; i++) peers.push(await gw.addPeer(10 + i));
    // One gateway per round (one peer address each): a tunnel address is held by one workspace at a time.
    const gateways: string[] = [];
    for (const [i, peer] of peers.entries()) {
      const gateway = await catalog.createGateway('wg-bench', { name: `wg-bench-${i}`, endpoint: gw.endpoint, config: { public_key: gw.publicKey, address: peer.address } });
      gateways.push(toWireId(gateway.id));
      const credential = await post(base, 'update_egress_credential', {
        ...auth, target_egress_credential: { egress_provider_id: toWireId(provider.id), name: `peer-${i}`, vpn_private_key: peer.privateKey, allow_all_gateways: false, selected_gateways: [toWireId(gateway.id)], user_id: user.user_id },
      });
      if (!credential.egress_credentials) throw new Error(`update_egress_credential: ${JSON.stringify(credential)}`);
    }
    await gw.serveBlob(BLOB_MB * 1024 ** 2);

    const launch = async (gatewayId?: string) => {
      const start = performance.now();
      const requested = await post(base, 'request_workspace', { ...auth, user_id: user.user_id, image_id: img.id, ...(gatewayId ? { egress_gateway_id: gatewayId } : {}) });
      const workspaceId = requested.workspace_id as string;
      if (!workspaceId) throw new Error(`request_workspace: ${JSON.stringify(requested)}`);
      await untilRunning(base, { ...auth, user_id: user.user_id, workspace_id: workspaceId }, 120_000);
      return { workspaceId, ms: performance.now() - start };
    };
    const download = async (workspaceId: string, address: string) => {
      const res = await post(base, 'exec_command_workspace', { ...auth, workspace_id: workspaceId, user_id: user.user_id, exec_config: { cmd: downloadBlobCommand(address) }, wait: true, timeout_seconds: 180 });
      const [bytes, ms] = String(res.stdout ?? '').trim().split('\n').map(Number);
      if (!(bytes >= BLOB_MB * 1024 ** 2) || !(ms > 0)) throw new Error(`download from ${address}: ${JSON.stringify(res)}`);
      return (bytes * 8) / (ms / 1000) / 1e6; // Mbit/s
    };

    const launchWith: number[] = [];
    const launchWithout: number[] = [];
    const throughWith: number[] = [];
    const throughWithout: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const direct = await launch();
      launchWithout.push(direct.ms);
      throughWithout.push(await download(direct.workspaceId, gw.canaryAddress));
      await post(base, 'destroy_workspace', { ...auth, user_id: user.user_id, workspace_id: direct.workspaceId });
      const tunnelled = await launch(gateways[round]);
      launchWith.push(tunnelled.ms);
      throughWith.push(await download(tunnelled.workspaceId, gw.outsideAddress));
      await post(base, 'destroy_workspace', { ...auth, user_id: user.user_id, workspace_id: tunnelled.workspaceId });
    }
    console.log(`\negress gateway (WireGuard in user space, ${ROUNDS} rounds, ${BLOB_MB} MiB download)`);
    console.log(row('request_workspace → running, with a gateway', launchWith));
    console.log(row('request_workspace → running, without (baseline)', launchWithout));
    console.log(`launch ratio at p50: ${(median(launchWith) / median(launchWithout)).toFixed(2)}  (no target)`);
    console.log(row('download through the tunnel', throughWith, 'Mbit/s'));
    console.log(row('download without it (baseline)', throughWithout, 'Mbit/s'));
    console.log(`throughput ratio at p50: ${(median(throughWith) / median(throughWithout)).toFixed(2)}  (no target)`);
  } finally {
    await bench.close();
    await gw.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
