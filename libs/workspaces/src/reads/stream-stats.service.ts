import { Injectable } from '@nestjs/common';
import { ApiError, ErrorCode, toWireId } from '@ws/common';
import { RedisConnections } from '@ws/queue';
import type { BottleneckFigures, RfbSessionStats } from '@ws/stream';
import type { Workspace } from '../workspace.entity';

/** What each gateway publishes per connection, every second (docs/stream-stats.md). */
export interface StreamSnapshot {
  stats: RfbSessionStats;
  bottleneck: BottleneckFigures;
  at: number;
}

export const STREAM_STATS_TTL_SECONDS = 5;
export const streamStatsKey = (workspaceId: string) => `stream:${workspaceId}`;

const round = (x: number | null | undefined) => Math.round(x ?? 0);

/**
 * get_workspace_frame_stats and get_workspace_bottleneck_stats, from the measurements the stream gateways
 * publish to Redis (so any api replica answers for connections carried by any other).
 */
@Injectable()
export class StreamStatsService {
  constructor(private readonly redis: RedisConnections) {}

  async snapshots(workspaceId: string): Promise<StreamSnapshot[]> {
    const raw = await this.redis.shared().hgetall(this.redis.key(streamStatsKey(workspaceId)));
    const horizon = Date.now() - STREAM_STATS_TTL_SECONDS * 1000;
    return Object.values(raw)
      .map((v) => JSON.parse(v) as StreamSnapshot)
      .filter((s) => s.at >= horizon && s.stats.phase !== 'closed')
      .sort((a, b) => new Date(a.stats.connectedAt).getTime() - new Date(b.stats.connectedAt).getTime());
  }

  async frameStats(workspace: Workspace, client = 'auto') {
    const all = await this.snapshots(workspace.id);
    if (all.length === 0) throw noClient(workspace);
    const selected = client === 'none' ? [] : client === 'all' ? all : client === 'auto' ? all.filter((s) => s.stats.userId === workspace.userId) : all.filter((s) => s.stats.client === client);
    if (client !== 'none' && selected.length === 0) {
      if (client === 'auto') throw new ApiError(ErrorCode.InvalidState, `The owner of workspace (${toWireId(workspace.id)}) is not connected`);
      if (client !== 'all') throw ApiError.invalidId('client', client);
    }
    // The frame is the most recently updated stream's view of the desktop.
    const latest = [...(selected.length ? selected : all)].sort((a, b) => b.stats.updates - a.stats.updates)[0].stats;
    const encodings = latest.encodings;
    const tight = encodings.tight ?? { time: 0, count: 0, area: 0, timeMs: 0 };
    return {
      frame: { resx: latest.resx, resy: latest.resy, changed: round(latest.changed), server_time: round(latest.server_time) },
      clients: selected.map((s) => ({
        client: s.stats.client,
        client_time: round((s.stats.server_time ?? 0) + (s.stats.pingMs ?? 0) / 2),
        ping: round(s.stats.pingMs),
        processes: Object.entries(s.stats.encodings).map(([name, e]) => ({ process_name: name, time: round(e.timeMs) })),
      })),
      analysis: round(latest.server_time),
      screenshot: 0,
      encoding_total: round(Object.values(encodings).reduce((sum, e) => sum + e.timeMs, 0)),
      videoscaling: 0,
      tightjpegencoder: { time: round(tight.timeMs), count: tight.count, area: tight.area },
      tightwebpencoder: { time: 0, count: 0, area: 0 },
    };
  }

  async bottleneckStats(workspace: Workspace) {
    const all = await this.snapshots(workspace.id);
    if (all.length === 0) throw noClient(workspace);
    return { workspace_user: Object.fromEntries(all.map((s) => [s.stats.client, s.bottleneck.map((x) => Math.round(x * 100) / 100)])) };
  }
}

function noClient(workspace: Workspace): ApiError {
  return new ApiError(ErrorCode.InvalidState, `No client is connected to workspace (${toWireId(workspace.id)}); stream statistics need a user using the session`);
}
