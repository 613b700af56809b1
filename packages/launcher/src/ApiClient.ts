/**
 * The few calls the launcher and the demo make to the running API, over real HTTP. Each call is one request:
 * a 503 comes back to the caller with its Retry-After, and the caller decides when to come back.
 */
import { Data, Effect } from "effect"

/** A response the caller did not expect. */
export class UnexpectedResponse extends Data.TaggedError("UnexpectedResponse")<{
  readonly request: string
  readonly status: number
  readonly body: string
}> {
  override get message(): string {
    return `${this.request} answered ${this.status}: ${this.body}`
  }
}

/** One response: status, Retry-After (seconds) when present, parsed JSON body, and how long it took. */
export interface Response {
  readonly status: number
  readonly retryAfter: number | undefined
  readonly body: unknown
  readonly millis: number
}

/** Sends one request to the API and reads its JSON answer. */
export const send = (
  baseUrl: string,
  method: "GET" | "POST",
  path: string,
  options: { readonly token?: string; readonly body?: unknown } = {}
): Effect.Effect<Response> =>
  Effect.promise(async () => {
    const started = performance.now()
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
        ...(options.body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
    })
    const text = await response.text()
    const retryAfter = response.headers.get("retry-after")
    return {
      status: response.status,
      retryAfter: retryAfter === null ? undefined : Number(retryAfter),
      body: text === "" ? undefined : JSON.parse(text),
      millis: performance.now() - started
    }
  })

/** Like `send`, but anything other than `expected` is an UnexpectedResponse. */
export const expect = (
  expected: ReadonlyArray<number>,
  baseUrl: string,
  method: "GET" | "POST",
  path: string,
  options: { readonly token?: string; readonly body?: unknown } = {}
) =>
  Effect.flatMap(send(baseUrl, method, path, options), (response) =>
    expected.includes(response.status)
      ? Effect.succeed(response)
      : Effect.fail(
        new UnexpectedResponse({
          request: `${method} ${path}`,
          status: response.status,
          body: JSON.stringify(response.body)
        })
      ))
