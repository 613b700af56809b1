/**
 * The wire contract of a wake: `POST /wake` with `{"schema": "<tenant schema>"}`, answered at once with `202`
 * and what the receiver decided (`{"decision": "pollNow" | "oneMoreAfter" | "coalesced" | "ignored"}`), or a
 * `400` naming the field that was wrong, or a `404` when the receiver does not serve that schema. The body is
 * decoded with `Schema`, so the sender ({@link WakeSender}) and the receiver (the deriver app) share one
 * definition.
 *
 * @since 0.3.0
 */
import { SchemaName } from "@resilience/schema"
import { Result, Schema, SchemaIssue } from "effect"
import type { Decision } from "./Coalesce.ts"

/**
 * The path a receiver serves wakes on.
 *
 * @since 0.3.0
 * @category contract
 */
export const path = "/wake"

// A tenant schema name, as `@resilience/schema`'s `SchemaName` allows it.
const Tenant = Schema.String.check(
  Schema.makeFilter((name: string) => SchemaName.problem(name) ?? true, {
    expected: "a schema name (1 to 63 characters of a-z, 0-9 and _, starting with a letter or _)"
  })
)

/**
 * The request body: the schema whose queue got work.
 *
 * @since 0.3.0
 * @category contract
 */
export const WakeRequest = Schema.Struct({ schema: Tenant })

/**
 * The request body, decoded.
 *
 * @since 0.3.0
 * @category contract
 */
export type WakeRequest = typeof WakeRequest.Type

/**
 * A body that is not a {@link WakeRequest}: `detail` names the field and what is allowed.
 *
 * @since 0.3.0
 * @category errors
 */
export class InvalidWake extends Schema.TaggedError<InvalidWake>()("InvalidWake", {
  detail: Schema.String
}) {}

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

/**
 * Decodes a body (parsed JSON, or anything else) into a {@link WakeRequest}, or an {@link InvalidWake} whose
 * detail names the first field that was wrong (`schema: …`).
 *
 * @since 0.3.0
 * @category decoding
 */
export const decode = (body: unknown): Result.Result<WakeRequest, InvalidWake> => {
  const decoded = Schema.decodeUnknownResult(WakeRequest)(body)
  if (Result.isSuccess(decoded)) return Result.succeed(decoded.success)
  const issues = formatter(decoded.failure.issue).issues
  const first = issues[0]
  const where = first?.path === undefined || first.path.length === 0
    ? "body"
    : first.path.map((segment) =>
      String(typeof segment === "object" && segment !== null && "key" in segment ? segment.key : segment)
    ).join(".")
  return Result.fail(
    new InvalidWake({ detail: `Invalid wake: ${where}: ${first?.message ?? "expected {\"schema\": string}"}` })
  )
}

/**
 * Decodes the bytes of a request body (JSON text).
 *
 * @since 0.3.0
 * @category decoding
 */
export const decodeText = (text: string): Result.Result<WakeRequest, InvalidWake> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return Result.fail(new InvalidWake({ detail: "Invalid wake: body: expected JSON {\"schema\": string}" }))
  }
  return decode(parsed)
}

/**
 * The `202` body: what the receiver decided.
 *
 * @since 0.3.0
 * @category contract
 */
export interface Accepted {
  readonly decision: Decision
}

/**
 * Encodes a request body.
 *
 * @since 0.3.0
 * @category encoding
 */
export const encode = (request: WakeRequest): string => JSON.stringify({ schema: request.schema })
