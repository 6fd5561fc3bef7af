// What other libraries and the apps use of @ws/metrics; everything else is internal to it.
export { METRIC_PREFIX, Metrics, secondsSince } from './metrics';
export type { ScrapeCollector } from './metrics';
export { DEFAULT_METRICS_PORTS, MetricsModule, MetricsServer, metricsPort } from './metrics.module';
export type { MetricsRole } from './metrics.module';
export type { ReadinessProbe } from './metrics-listener';
