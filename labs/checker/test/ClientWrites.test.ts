import { assert, describe, it } from "@effect/vitest"
import { ClientErrors } from "@resilience/api-client"
import { Exit } from "effect"
import * as ClientWrites from "../src/ClientWrites.ts"

describe("ClientWrites.classify", () => {
  it("a success is acknowledged, a 4xx refused, an unavailable API, a 500 or a defect unknown", () => {
    const endpoint = "appendMessages"
    const unavailable = (status: number | undefined) =>
      new ClientErrors.ApiUnavailable({
        endpoint,
        attempts: 3,
        gaveUp: "AttemptsExhausted",
        status,
        retryAfterMillis: undefined,
        detail: ""
      })
    const cases: ReadonlyArray<readonly [Exit.Exit<unknown, ClientErrors.ClientError>, string]> = [
      [Exit.succeed({ stored: 1 }), "acknowledged"],
      [Exit.fail(new ClientErrors.ApiRejected({ endpoint, status: 422, detail: "" })), "refused"],
      [Exit.fail(new ClientErrors.ApiRejected({ endpoint, status: 400, detail: "" })), "refused"],
      [Exit.fail(new ClientErrors.ApiUnauthorized({ endpoint, status: 401, detail: "" })), "refused"],
      [Exit.fail(new ClientErrors.ApiRejected({ endpoint, status: 500, detail: "" })), "unknown"],
      [Exit.fail(unavailable(503)), "unknown"],
      [Exit.fail(unavailable(undefined)), "unknown"],
      [Exit.die(new Error("boom")), "unknown"]
    ]
    for (const [exit, outcome] of cases) assert.strictEqual(ClientWrites.classify(exit), outcome, String(exit))
  })
})
