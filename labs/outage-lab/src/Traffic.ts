/**
 * Open-loop API-like traffic: requests arrive as a Poisson process at a fixed rate whether or not the
 * database keeps up (the arrival times are drawn ahead and kept, so a slow event loop catches up rather than
 * slowing the arrivals down), and each one is a checkout through the same pooler with the policy's session
 * and one statement that holds its backend for `api-query-ms` or, with `writes`, one append of a domain message
 * (a transaction: the message and its representation task), recorded in the run's history.
 */
import { History } from "@resilience/checker"
import { DbSession } from "@resilience/db-session"
import { Messages } from "@resilience/domain"
import { Clock, Duration, Effect, FiberSet, Layer, Random } from "effect"
import type * as Counters from "./Counters.ts"
import * as Fleet from "./Fleet.ts"
import * as Sessions from "./Sessions.ts"
import type { Settings } from "./Settings.ts"

/** Runs the arrivals until interrupted; requests in flight are interrupted with it. */
export const run = (settings: Settings, url: string, counters: Counters.Counters, history: History.History) =>
  Effect.gen(function*() {
    if (settings.apiRps <= 0) return yield* Effect.never
    const session = yield* DbSession
    const schema = Fleet.schemaOf(0)
    const append = (n: number) => {
      const write = { client: "api", workspace: Fleet.workspace, session: `s${n % 4}`, peer: `p${n % 8}` }
      const content = `message ${n} about lanterns and harbors`
      return History.record(
        history,
        { ...write, content },
        Messages.append(schema, write.workspace, write.session, [{ peer: write.peer, content }])
      ).pipe(Effect.provideService(DbSession, session))
    }
    const request = (n: number) =>
      (settings.writes
        ? Effect.asVoid(append(n))
        : Effect.asVoid(session.query("SELECT pg_sleep($1)", [settings.apiQueryMillis / 1000]))).pipe(
          Effect.matchEffect({
            onSuccess: () =>
              Effect.sync(() => {
                counters.apiServed += 1
              }),
            onFailure: () =>
              Effect.sync(() => {
                counters.apiFailed += 1
              })
          })
        )
    const inFlight = yield* FiberSet.make()
    let next = yield* Clock.currentTimeMillis
    for (;;) {
      next += (-Math.log(1 - (yield* Random.next)) / settings.apiRps) * 1000
      const wait = next - (yield* Clock.currentTimeMillis)
      yield* wait > 0 ? Effect.sleep(Duration.millis(wait)) : Effect.yieldNow
      counters.apiArrived += 1
      yield* FiberSet.run(inFlight, request(counters.apiArrived))
    }
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.fresh(Sessions.layer({
      url,
      policy: settings.policy,
      role: "api",
      counters,
      connectTimeoutSeconds: settings.connectTimeoutSeconds
    })))
  )
