import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { Metrics } from '@ws/metrics';
import { JobProducer, queueDepths } from '@ws/queue';
import { stagingPools } from '@ws/staging';
import { networkHolderCounts, serverCapacity, workspacesByStatusAndServer } from '@ws/workspaces';

/**
 * The worker's figures read at scrape time (only the worker reads them, so api replicas add no queries): queue
 * depths from Redis, workspaces by status and server, server capacity, network holders and staging pools from PostgreSQL, each a
 * bounded read. Each gauge is reset before it is read, so a failed read leaves it empty rather than stale.
 */
@Injectable()
export class FleetMetrics implements OnModuleInit {
  constructor(
    private readonly metrics: Metrics,
    private readonly producer: JobProducer,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  onModuleInit(): void {
    const m = this.metrics;
    m.onScrape('queue depths', async () => {
      m.queueJobs.reset();
      for (const { queue, state, count } of await queueDepths(this.producer)) m.queueJobs.set({ queue, state }, count);
    });
    m.onScrape('workspaces', async () => {
      m.workspaces.reset();
      for (const { status, server, count } of await workspacesByStatusAndServer(this.db.manager)) m.workspaces.set({ status, server }, count);
    });
    m.onScrape('server capacity', async () => {
      for (const gauge of [m.serverUp, m.serverCoresUsed, m.serverCoresOffered, m.serverMemoryUsed, m.serverMemoryOffered]) gauge.reset();
      for (const s of await serverCapacity(this.db.manager)) {
        if (s.enabled) m.serverUp.set({ server: s.server }, s.up ? 1 : 0);
        m.serverCoresUsed.set({ server: s.server }, s.usedCores);
        m.serverMemoryUsed.set({ server: s.server }, s.usedMemory);
        // A disabled server offers nothing to placement.
        m.serverCoresOffered.set({ server: s.server }, s.enabled ? s.offeredCores : 0);
        m.serverMemoryOffered.set({ server: s.server }, s.enabled ? s.offeredMemory : 0);
      }
    });
    m.onScrape('network holders', async () => {
      m.networkHolders.reset();
      for (const { server, free, claimed } of await networkHolderCounts(this.db.manager)) {
        m.networkHolders.set({ server, state: 'free' }, free);
        m.networkHolders.set({ server, state: 'claimed' }, claimed);
      }
    });
    m.onScrape('staging pools', async () => {
      for (const gauge of [m.stagedDesired, m.stagedReady, m.stagedStarting]) gauge.reset();
      for (const p of await stagingPools(this.db.manager)) {
        m.stagedDesired.set({ pool: p.pool }, p.desired);
        m.stagedReady.set({ pool: p.pool }, p.ready);
        m.stagedStarting.set({ pool: p.pool }, p.starting);
      }
    });
  }
}
