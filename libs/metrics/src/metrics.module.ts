import { DynamicModule, Global, Inject, Injectable, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '@ws/common';
import { Metrics } from './metrics';
import { MetricsListener } from './metrics-listener';

/** Which process this is: its default port (api 9464, worker 9465); `none` (the CLI) never listens. */
export type MetricsRole = 'api' | 'worker' | 'none';
export const DEFAULT_METRICS_PORTS: Record<Exclude<MetricsRole, 'none'>, number> = { api: 9464, worker: 9465 };
const ROLE = Symbol('metrics role');

/** The port this process's metrics listener uses: METRICS_PORT, else the role's default; 0 means none. */
export function metricsPort(config: Pick<AppConfig, 'METRICS_PORT'>, role: MetricsRole): number {
  if (role === 'none') return 0;
  return config.METRICS_PORT ?? DEFAULT_METRICS_PORTS[role];
}

/** Opens the listener when the application starts (after every provider registered its scrape collectors). */
@Injectable()
export class MetricsServer implements OnApplicationBootstrap, OnModuleDestroy {
  readonly listener: MetricsListener;

  constructor(
    metrics: Metrics,
    private readonly config: AppConfig,
    @Inject(ROLE) private readonly role: MetricsRole,
  ) {
    this.listener = new MetricsListener(metrics, Math.min(5000, config.DEPENDENCY_TIMEOUT_MS * 2));
  }

  async onApplicationBootstrap(): Promise<void> {
    const port = metricsPort(this.config, this.role);
    if (port > 0) await this.listener.listen(port, this.config.METRICS_HOST);
  }

  onModuleDestroy(): Promise<void> {
    return this.listener.close();
  }
}

/**
 * Global: `Metrics` (the metric objects of this process, its own registry) and the listener. Node's default
 * process metrics are collected only where a listener can show them.
 */
@Global()
@Module({})
export class MetricsModule {
  static forRoot(role: MetricsRole): DynamicModule {
    return {
      module: MetricsModule,
      providers: [
        { provide: ROLE, useValue: role },
        { provide: Metrics, inject: [AppConfig], useFactory: (config: AppConfig) => new Metrics({ defaultMetrics: metricsPort(config, role) > 0 }) },
        MetricsServer,
      ],
      exports: [Metrics, MetricsServer],
    };
  }
}
