/**
 * The connection-acquisition retry that the fix removed, kept here only so the simulator can show what it
 * did. It mirrors tenacity's `wait_exponential_jitter(initial, max, jitter)` with `stop_after_delay(budget)`
 * as the reference service used it (0.1 s initial, 2 s max, 1 s jitter, 10 s budget): after the k-th failed
 * attempt wait `min(initial · 2^(k−1) + U(0, jitter), max)`, and give up once a failed attempt finds the
 * budget spent. Nothing outside the simulator uses this.
 *
 * @since 0.1.0
 */

/**
 * The removed retry's settings, in milliseconds.
 *
 * @since 0.1.0
 */
export interface Settings {
  readonly initialMillis: number
  readonly maxMillis: number
  readonly jitterMillis: number
  readonly budgetMillis: number
}

/**
 * The reference service's values: `CONNECTION_RETRY_BACKOFF_INITIAL_SECONDS = 0.1`,
 * `CONNECTION_RETRY_BACKOFF_MAX_SECONDS = 2`, tenacity's default jitter of 1 s,
 * `CONNECTION_RETRY_MAX_DELAY_SECONDS = 10`.
 *
 * @since 0.1.0
 */
export const reference: Settings = { initialMillis: 100, maxMillis: 2_000, jitterMillis: 1_000, budgetMillis: 10_000 }

/**
 * Whether to give up after a failed attempt, `elapsedMillis` after the first one started.
 *
 * @since 0.1.0
 */
export const exhausted = (settings: Settings, elapsedMillis: number): boolean => elapsedMillis >= settings.budgetMillis

/**
 * The wait after the `attempt`-th failed attempt (1-based) for a uniform draw `u` in [0, 1).
 *
 * @since 0.1.0
 */
export const waitFrom = (settings: Settings, attempt: number, u: number): number =>
  Math.max(0, Math.min(settings.initialMillis * 2 ** (attempt - 1) + u * settings.jitterMillis, settings.maxMillis))
