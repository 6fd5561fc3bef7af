import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { toWireId } from '@ws/common';
import { Metrics, secondsSince } from '@ws/metrics';
import { connectPath, LaunchOrder, LaunchStep, LaunchStepProvider, ResolvedLaunch, setClientSettingsOverride } from '@ws/workspaces';
import { StagingService } from './staging.service';

/** The launch's claim: a matching staged workspace is handed over already running, and no new one is started. */
@Injectable()
@LaunchStepProvider()
export class ClaimStagedStep implements LaunchStep {
  readonly name = 'claim staged';
  readonly order = LaunchOrder.ClaimStaged;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly staging: StagingService,
    private readonly metrics: Metrics,
  ) {}

  async run(launch: ResolvedLaunch): Promise<void> {
    if (launch.request.containerNetwork) return; // a staged container already joined its network
    if (launch.image.kind === 'server') return; // staging starts containers of container images only
    const { user, image, settings, request } = launch;
    const started = performance.now();
    const staged = await this.staging.claim({ user, image, settings, request });
    if (!staged) return;
    this.metrics.stagedClaimed.inc();
    this.metrics.stagedClaimDuration.observe(secondsSince(started));
    const override = request.clientSettingsOverride;
    if (Object.keys(override).length > 0) await setClientSettingsOverride(this.db.manager, staged.workspaceId, override);
    launch.answer = {
      workspace_id: toWireId(staged.workspaceId), session_token: staged.jwt, username: user.username, status: 'running', share_id: staged.shareId,
      user_id: toWireId(user.id), workspace_url: connectPath(staged.workspaceId, user.id, staged.jwt),
    };
  }
}
