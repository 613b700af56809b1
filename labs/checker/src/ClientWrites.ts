/**
 * Writes through `@resilience/api-client`, recorded in a {@link History.History}: what a failure of the client
 * proves about the write, and one message appended and recorded.
 *
 * @since 0.1.0
 */
import type { ApiClient, ClientErrors } from "@resilience/api-client"
import { Exit, Option } from "effect"
import type { Effect } from "effect"
import * as History from "./History.ts"

/**
 * What a failed write through the client proves: a 4xx answer, that nothing was written (`refused`); an API that
 * stayed unavailable (a 503 given up on, no answer) or a 500, nothing (`unknown`: it may hide a commit).
 *
 * @since 0.1.0
 */
export const outcomeOf = (error: ClientErrors.ClientError): History.Outcome =>
  error._tag === "ApiUnavailable" || error.status >= 500 ? "unknown" : "refused"

/**
 * {@link outcomeOf} as a {@link History.Classify}: success is `acknowledged`, a defect `unknown`.
 *
 * @since 0.1.0
 */
export const classify = <A>(exit: Exit.Exit<A, ClientErrors.ClientError>): History.Outcome => {
  if (Exit.isSuccess(exit)) return "acknowledged"
  const error = Option.getOrUndefined(Exit.findErrorOption(exit))
  return error === undefined ? "unknown" : outcomeOf(error)
}

/**
 * `write`'s one message appended through `client` with `token` (the client's retries and one Idempotency-Key
 * for all of them), recorded in `history` and classified by {@link classify}.
 *
 * @since 0.1.0
 */
export const append = (
  client: ApiClient.ApiClient,
  history: History.History,
  token: string,
  write: History.Request
): Effect.Effect<unknown, ClientErrors.ClientError> =>
  History.record(
    history,
    write,
    client.appendMessages({
      token,
      workspace: write.workspace,
      session: write.session,
      messages: [{ peer: write.peer, content: write.content }]
    }),
    classify
  )
