/**
 * The API's settings, from the environment (see README): an invalid value stops the process at start with
 * a message that names the variable.
 *
 * @since 0.1.0
 */
import { ReadinessProbe, Settings as Admission } from "@resilience/admission"
import { RetryAfter } from "@resilience/api-errors"
import { SchemaName } from "@resilience/domain"
import { Variables } from "@resilience/environment"
import { InvalidParameter } from "@resilience/parameters"
import { WakeSender } from "@resilience/wake"
import { Config, Context, Effect, Layer, type LogLevel, type Option, Redacted, Schema } from "effect"

/**
 * What the server needs to know.
 *
 * @since 0.1.0
 */
export interface Settings {
  /** `API_PORT` (8000); 0 picks a free port. */
  readonly port: number
  /** `API_HOST` (`0.0.0.0`). */
  readonly host: string
  /** `DB_SCHEMA` (`public`): the tenant schema this instance serves. */
  readonly schema: SchemaName.SchemaName
  /** `API_ADMIN_TOKEN` (required, at least 16 characters): may create workspaces. */
  readonly adminToken: Redacted.Redacted<string>
  /** `API_MAX_BODY_BYTES` (1 MiB): larger request bodies are a 413. */
  readonly maxBodyBytes: number
  /** `API_RETRY_AFTER_SECONDS` (1) and `API_RETRY_AFTER_MAX_SECONDS` (= the former). */
  readonly retryAfter: RetryAfter.RetryAfter
  /** Whether to migrate `schema` at start (`API_MIGRATE`, true). */
  readonly migrate: boolean
  /**
   * `API_IDEMPOTENCY_RETENTION_SECONDS` (86400): how long an `Idempotency-Key` of `POST …/messages` is
   * remembered; older keys are pruned and count as new. Optional here: 86400 when absent.
   */
  readonly idempotencyRetentionSeconds?: number | undefined
  /** The admission gate in front of the database work (`API_ADMISSION_*`; unset: `@resilience/admission`'s defaults). */
  readonly admission?: Admission.Settings | undefined
  /** `/readyz` answers from a check at most this old (`API_READINESS_CACHE_MILLIS`, 1000). */
  readonly readinessCacheMillis?: number | undefined
  /**
   * The wake of the deriver after each write that enqueued work (`API_WAKE_URL`, `API_WAKE_TIMEOUT_MILLIS`):
   * none (the default) sends nothing.
   */
  readonly wake?: Option.Option<WakeSender.Settings> | undefined
}

/**
 * The settings as a service, for the handlers.
 *
 * @since 0.1.0
 */
export class AppSettings extends Context.Service<AppSettings, Settings>()("@resilience/api-app/AppSettings") {
  /** From explicit values. */
  static readonly layer = (settings: Settings): Layer.Layer<AppSettings> => Layer.succeed(AppSettings, settings)
}

const Port = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 65_535 }))
const RetentionSeconds = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 30 * 86_400 }))
const BodyBytes = Schema.Int.check(Schema.isBetween({ minimum: 1_024, maximum: 64 * 1_048_576 }))

/**
 * The settings from the environment.
 *
 * @since 0.1.0
 */
export const config: Config.Config<Settings> = Config.all({
  port: Config.schema(Port, Variables.api.port).pipe(Config.withDefault(8000)),
  host: Config.String(Variables.api.host).pipe(Config.withDefault("0.0.0.0")),
  schema: SchemaName.config(Variables.schema),
  adminToken: Config.Redacted(Variables.api.adminToken).pipe(
    InvalidParameter.validateConfig((token) =>
      Redacted.value(token).length >= 16
        ? Effect.succeed(token)
        : Effect.fail(
          new InvalidParameter.InvalidParameter({
            parameter: Variables.api.adminToken,
            value: token,
            allowed: "at least 16 characters"
          })
        )
    )
  ),
  maxBodyBytes: Config.schema(BodyBytes, Variables.api.maxBodyBytes).pipe(Config.withDefault(1_048_576)),
  retryAfter: RetryAfter.config(Variables.retryAfter),
  migrate: Config.Boolean(Variables.api.migrate).pipe(Config.withDefault(true)),
  idempotencyRetentionSeconds: Config.schema(RetentionSeconds, Variables.api.idempotencyRetentionSeconds).pipe(
    Config.withDefault(86_400)
  ),
  admission: Admission.config(Variables.admission),
  readinessCacheMillis: ReadinessProbe.cacheMillisConfig(Variables.readinessCacheMillis),
  wake: WakeSender.config(Variables.wake, SchemaName.config(Variables.schema))
})

/**
 * The settings service from the environment.
 *
 * @since 0.1.0
 */
export const layerConfig: Layer.Layer<AppSettings, Config.ConfigError> = Layer.effect(AppSettings, config)

/**
 * `API_LOG_LEVEL` (`Info`): the minimum level of the JSON logs.
 *
 * @since 0.2.0
 */
export const logLevelConfig: Config.Config<LogLevel.LogLevel> = Config.LogLevel(Variables.api.logLevel).pipe(
  Config.withDefault("Info" as const)
)
