/**
 * The names of the example product, as `Schema`s the API validates path and body parameters with (and a client
 * may check before it sends).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * A workspace name: a safe identifier of 1–64 characters, `a-z`, `A-Z`, `0-9`, `_` and `-`, starting with a
 * letter or a digit.
 *
 * @since 0.1.0
 * @category schemas
 */
export const WorkspaceName = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/))

/**
 * A session name: 1–128 characters of `a-z`, `A-Z`, `0-9`, `_`, `-`, `.` and `:`, starting with a letter or
 * a digit.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SessionName = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/))

/**
 * A peer name: same alphabet as a session name.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PeerName = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/))
