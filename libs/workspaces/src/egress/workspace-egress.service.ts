import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { SecretCipherError } from '@ws/common';
import {
  EgressConfigError, EgressConnection, EgressConnections, egressEnvironment, EgressReservation, EgressReservationRequest, EgressSecrets, egressSidecarFiles, EgressSidecarFiles,
} from '@ws/egress';
import { PermanentFailure } from '@ws/queue';

/** Thrown inside the check's transaction to roll its trial reservation back. */
class TrialReservation extends Error {}

/**
 * A workspace's egress connection over its life (libs/workspaces/README.md, "Egress"): checked before the
 * launch records anything, reserved in the "place and record" transaction, handed to the container as
 * EGRESS_* environment variables at provision, released in the transaction that marks the workspace deleted
 * (WorkspaceLifecycle.destroyed).
 * The rules (which credential, the connection limit) are EgressConnections'.
 */
@Injectable()
export class WorkspaceEgress {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly connections: EgressConnections,
    private readonly secrets: EgressSecrets,
  ) {}

  /**
   * The launch's early check, with the reservation's own rules: 400 unknown gateway, 403 no usable credential,
   * 409 every usable credential at its limit. A trial reservation, rolled back: the real one is made again in
   * "place and record", where the limit is held under concurrency.
   */
  async check(request: EgressReservationRequest): Promise<void> {
    try {
      await this.db.transaction(async (tx) => {
        await this.connections.reserve(tx, request);
        throw new TrialReservation();
      });
    } catch (err) {
      if (!(err instanceof TrialReservation)) throw err;
    }
  }

  /** Inside the launch's transaction, before the workspace row is recorded. */
  reserve(tx: EntityManager, request: EgressReservationRequest): Promise<EgressReservation> {
    return this.connections.reserve(tx, request);
  }

  /** The workspace's connection back to its credential, in a transaction of its own (idempotent). */
  async release(workspaceId: string): Promise<void> {
    await this.db.transaction((tx) => this.connections.release(tx, workspaceId));
  }

  /**
   * The container's egress variables (empty without egress; never a secret of a provider that runs in a sidecar).
   * A workspace launched with a gateway whose connection is gone (its credential or gateway deleted since) cannot
   * start as asked: a permanent failure.
   */
  async environmentOf(workspace: { id: string; launchOptions: { egressGatewayId?: string } }): Promise<Record<string, string>> {
    const reservation = await this.reservationOf(workspace);
    return reservation ? egressEnvironment(reservation) : {};
  }

  /**
   * The egress sidecar of the workspace (docs/decisions/egress.md, "Egress for real"): its files (the credential's
   * secret among them) and the gateway's name for messages; null without egress or for a provider type that does not
   * run in a sidecar yet. A gateway config that cannot make a tunnel is a permanent failure naming the gateway.
   */
  async sidecarOf(workspace: { id: string; launchOptions: { egressGatewayId?: string } }): Promise<(EgressSidecarFiles & { gatewayName: string }) | null> {
    const reservation = await this.reservationOf(workspace);
    if (!reservation) return null;
    try {
      const sidecar = egressSidecarFiles(reservation);
      return sidecar && { ...sidecar, gatewayName: reservation.gateway.name };
    } catch (err) {
      if (err instanceof EgressConfigError) throw new PermanentFailure(err.message);
      throw err;
    }
  }

  private async reservationOf(workspace: { id: string; launchOptions: { egressGatewayId?: string } }): Promise<EgressReservation | null> {
    if (!workspace.launchOptions.egressGatewayId) return null;
    const connection = await this.db.getRepository(EgressConnection).findOne({
      where: { workspaceId: workspace.id }, relations: { credential: { provider: true }, gateway: true },
    });
    if (!connection?.credential?.provider) throw new PermanentFailure('The egress credential of this workspace was deleted before it started');
    if (!connection.gateway) throw new PermanentFailure('The egress gateway of this workspace was deleted before it started');
    const { credential, gateway } = connection;
    try {
      // Stored sealed (EgressSecrets): opened here, for the sidecar's files or the container's variables only.
      return { credential: this.secrets.reveal(credential), gateway, provider: credential.provider as EgressReservation['provider'] };
    } catch (err) {
      if (!(err instanceof SecretCipherError)) throw err;
      throw new PermanentFailure(`The secret of the egress credential ${credential.name} cannot be read: ${err.message}`);
    }
  }
}
