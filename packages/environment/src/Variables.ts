/**
 * The names of the environment variables, per library whose `Config` reads them. The libraries take these
 * names as an argument and bind none themselves; the apps (and `npm start`, the lab, the benches) pass these, so
 * a name is written once and the README's configuration table lists them all.
 *
 * @since 0.1.0
 */
import type { Settings as AdmissionSettings } from "@resilience/admission"
import type { RetryAfter } from "@resilience/api-errors"
import type { DbConfig } from "@resilience/db-session"
import type { DeriverConfig } from "@resilience/deriver"
import type { WakeSender } from "@resilience/wake"

/**
 * The database session's variables (`DbSession.layerConfig`), the reference service's names.
 *
 * @since 0.1.0
 */
export const database = {
  url: "DATABASE_URL",
  connectTimeoutSeconds: "DB_CONNECT_TIMEOUT_SECONDS",
  poolClass: "DB_POOL_CLASS",
  poolSize: "DB_POOL_SIZE",
  driver: "DB_DRIVER",
  applicationName: "DB_APPLICATION_NAME",
  statementTimeoutSeconds: "DB_STATEMENT_TIMEOUT_SECONDS",
  sslmode: "DB_SSLMODE",
  sslrootcert: "DB_SSLROOTCERT",
  sslcert: "DB_SSLCERT",
  sslkey: "DB_SSLKEY"
} as const satisfies DbConfig.Names

/**
 * The tenant schema an API or deriver serves.
 *
 * @since 0.1.0
 */
export const schema = "DB_SCHEMA"

/**
 * The API's `Retry-After` on a 503 (`RetryAfter.config`).
 *
 * @since 0.1.0
 */
export const retryAfter = {
  seconds: "API_RETRY_AFTER_SECONDS",
  maxSeconds: "API_RETRY_AFTER_MAX_SECONDS"
} as const satisfies RetryAfter.Names

/**
 * The API's admission gate (`Settings.config`, `Gate.layerConfig` of `@resilience/admission`).
 *
 * @since 0.1.0
 */
export const admission = {
  enabled: "API_ADMISSION_ENABLED",
  maxConcurrency: "API_ADMISSION_MAX_CONCURRENCY",
  minConcurrency: "API_ADMISSION_MIN_CONCURRENCY",
  queueTimeoutMillis: "API_ADMISSION_QUEUE_TIMEOUT_MILLIS",
  slowMillis: "API_ADMISSION_SLOW_MILLIS",
  tripFailures: "API_ADMISSION_TRIP_FAILURES",
  openMillis: "API_ADMISSION_OPEN_MILLIS",
  openMaxMillis: "API_ADMISSION_OPEN_MAX_MILLIS",
  openJitterRatio: "API_ADMISSION_OPEN_JITTER_RATIO"
} as const satisfies AdmissionSettings.Names

/**
 * How old a `/readyz` answer may be (`ReadinessProbe.cacheMillisConfig` of `@resilience/admission`).
 *
 * @since 0.1.0
 */
export const readinessCacheMillis = "API_READINESS_CACHE_MILLIS"

/**
 * The deriver's settings (`DeriverConfig.config` of `@resilience/deriver`).
 *
 * @since 0.1.0
 */
export const deriver = {
  workers: "DERIVER_WORKERS",
  pollingSleepIntervalSeconds: "DERIVER_POLLING_SLEEP_INTERVAL_SECONDS",
  pollingSleepMaxIntervalSeconds: "DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS",
  pollingBackoffMultiplier: "DERIVER_POLLING_BACKOFF_MULTIPLIER",
  pollingBackoffEnabled: "DERIVER_POLLING_BACKOFF_ENABLED",
  pollingJitterRatio: "DERIVER_POLLING_JITTER_RATIO",
  pollingInitialInterval: "DERIVER_POLLING_INITIAL_INTERVAL",
  pollingStartupJitterSeconds: "DERIVER_POLLING_STARTUP_JITTER_SECONDS",
  staleSessionTimeoutMinutes: "DERIVER_STALE_SESSION_TIMEOUT_MINUTES",
  staleWorkUnitCleanupIntervalSeconds: "DERIVER_STALE_WORK_UNIT_CLEANUP_INTERVAL_SECONDS",
  shutdownGraceSeconds: "DERIVER_SHUTDOWN_GRACE_SECONDS",
  batchSize: "DERIVER_BATCH_SIZE",
  prefetch: "DERIVER_PREFETCH",
  overloadSlowPollSeconds: "DERIVER_OVERLOAD_SLOW_POLL_SECONDS",
  overloadMaxIntervalSeconds: "DERIVER_OVERLOAD_MAX_INTERVAL_SECONDS",
  overloadRecoverySeconds: "DERIVER_OVERLOAD_RECOVERY_SECONDS",
  overloadEnabled: "DERIVER_OVERLOAD_ENABLED",
  historyRetentionHours: "DERIVER_HISTORY_RETENTION_HOURS",
  claimTimeoutSeconds: "DERIVER_CLAIM_TIMEOUT_SECONDS",
  wakeMinIntervalSeconds: "DERIVER_WAKE_MIN_INTERVAL_SECONDS"
} as const satisfies DeriverConfig.Names

/**
 * The API app's own settings (`apps/api`'s `Settings`); `npm start` reads the port and the admin token too.
 *
 * @since 0.1.0
 */
export const api = {
  port: "API_PORT",
  host: "API_HOST",
  adminToken: "API_ADMIN_TOKEN",
  maxBodyBytes: "API_MAX_BODY_BYTES",
  migrate: "API_MIGRATE",
  idempotencyRetentionSeconds: "API_IDEMPOTENCY_RETENTION_SECONDS",
  logLevel: "API_LOG_LEVEL"
} as const

/**
 * The API's wake of its deriver (`WakeSender.config` of `@resilience/wake`): the deriver's `/wake` URL (unset:
 * off) and the bound on one request.
 *
 * @since 0.3.0
 */
export const wake = {
  url: "API_WAKE_URL",
  timeoutMillis: "API_WAKE_TIMEOUT_MILLIS"
} as const satisfies WakeSender.Names

/**
 * The deriver app's own settings (`apps/deriver`'s `appConfig`); `npm start` reads the metrics port too.
 *
 * @since 0.1.0
 */
export const deriverApp = {
  migrate: "DERIVER_MIGRATE",
  metricsPort: "DERIVER_METRICS_PORT"
} as const
