import { assert, describe, it } from "@effect/vitest"
import { History as Operations } from "@resilience/checker"
import * as History from "../src/History.ts"

const attempt = (sentAt: number, answeredAt: number, status: number | "transport", retryAfter = status === 503) => ({
  sentAt,
  answeredAt,
  status,
  retryAfter
})

/** The checker's history of writes that ended as given (one pending write: never completed). */
const operations = (outcomes: ReadonlyArray<Operations.Outcome | "pending">) => {
  const history = Operations.make()
  outcomes.forEach((outcome, n) => {
    const index = history.invoke({ client: "c", workspace: "w", session: "s", peer: "p", content: `m${n}` })
    if (outcome !== "pending") history.complete(index, outcome)
  })
  return history
}

describe("History.figures", () => {
  const faultAt = 10_000
  const history: History.History = {
    attempts: [
      attempt(9_000, 9_100, 201),
      attempt(9_800, 9_900, 201),
      // in flight on the old primary, answered late: not the recovery
      attempt(9_950, 10_600, 201),
      attempt(10_100, 10_500, 503),
      attempt(10_700, 10_800, 503),
      attempt(10_900, 11_000, 503, false),
      attempt(11_500, 11_700, 500),
      attempt(12_000, 12_100, "transport"),
      attempt(12_400, 12_500, 201),
      attempt(12_600, 12_650, 201)
    ],
    operations: operations(["acknowledged", "refused", "unknown", "acknowledged", "pending"])
  }
  const f = History.figures(history, faultAt)

  it("times the window from the fault: first and last refusal, first 201 sent after the first refusal", () => {
    assert.strictEqual(f.firstRefusalMillis, 500)
    assert.strictEqual(f.lastRefusalMillis, 2_100)
    assert.strictEqual(f.firstAcknowledgedMillis, 2_500)
  })

  it("finds the longest stretch without a 201 from a second before the fault", () => {
    assert.strictEqual(f.longestGapMillis, 1_900)
    assert.strictEqual(f.gapEndMillis, 2_500)
  })

  it("takes the latency of the 201s answered before the fault", () => {
    assert.deepStrictEqual(f.latencyBeforeMillis, { p50: 100, p99: 100 })
  })

  it("counts answers by kind and writes by outcome", () => {
    assert.deepInclude(f, {
      unavailableWithRetryAfter: 2,
      unavailableWithoutRetryAfter: 1,
      internalErrors: 1,
      transportFailures: 1,
      otherStatuses: 0,
      writes: 5,
      acknowledged: 2,
      refused: 1,
      unknown: 2
    })
  })

  it("with no refusal, the first 201 after the fault", () => {
    const quiet = History.figures(
      { attempts: [attempt(9_000, 9_100, 201), attempt(10_050, 10_200, 201)], operations: operations([]) },
      faultAt
    )
    assert.strictEqual(quiet.firstRefusalMillis, null)
    assert.strictEqual(quiet.firstAcknowledgedMillis, 200)
  })

  it("buckets answers per second from the fault", () => {
    assert.deepStrictEqual(History.timeline(history, faultAt, -1).slice(0, 2), [
      { second: -1, acknowledged: 2, unavailable: 0, other: 0 },
      { second: 0, acknowledged: 1, unavailable: 2, other: 0 }
    ])
  })
})
