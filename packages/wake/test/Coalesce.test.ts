import { describe, expect, it } from "@effect/vitest"
import { Coalesce } from "@resilience/wake"

/** Runs a script of events through the pure machine and returns every wake's decision and every `again`. */
const run = (events: ReadonlyArray<"wake" | "start" | "ok" | "fail" | "wokenFail" | "wokenOk">) => {
  let state = Coalesce.initial
  const out: Array<string> = []
  let at = 0
  for (const event of events) {
    at += 1
    switch (event) {
      case "wake": {
        const [decision, next] = Coalesce.wake(state)
        state = next
        out.push(decision)
        break
      }
      case "start":
        state = Coalesce.started(state, at)
        break
      default: {
        const done = Coalesce.finished(state, {
          succeeded: event === "ok" || event === "wokenOk",
          woken: event === "wokenFail" || event === "wokenOk"
        })
        state = done.state
        out.push(done.again ? "again" : "sleep")
      }
    }
  }
  return out
}

describe("Coalesce", () => {
  it("a wake with nothing in flight polls now; more before the poll starts are coalesced into it", () => {
    expect(run(["wake", "wake", "wake", "start", "ok"])).toEqual(["pollNow", "coalesced", "coalesced", "sleep"])
  })

  it("wakes during a poll make exactly one more poll, however many arrive", () => {
    const flood = Array.from({ length: 1000 }, () => "wake" as const)
    const out = run(["start", ...flood, "ok", "start", "ok"])
    expect(out.filter((d) => d === "oneMoreAfter")).toHaveLength(1)
    expect(out.filter((d) => d === "coalesced")).toHaveLength(999)
    expect(out.slice(-2)).toEqual(["again", "sleep"])
  })

  it("a poll that starts covers the wakes before it: a wake after it asks for one more", () => {
    expect(run(["wake", "start", "wake", "ok", "start", "ok"])).toEqual(["pollNow", "oneMoreAfter", "again", "sleep"])
  })

  it("a woken poll that fails disarms wakes until a poll succeeds", () => {
    expect(run(["wake", "start", "wake", "wokenFail", "wake", "start", "fail", "wake", "start", "ok", "wake"]))
      .toEqual(["pollNow", "oneMoreAfter", "sleep", "ignored", "sleep", "ignored", "sleep", "pollNow"])
  })

  it("disarmed wakes are honoured again once rearmAfterMillis have passed since the last poll started", () => {
    const [, waiting] = Coalesce.wake(Coalesce.initial, 0, 1000)
    const disarmed = Coalesce.finished(Coalesce.started(waiting, 5000), { succeeded: false, woken: true }).state
    expect(disarmed.armed).toBe(false)
    // within the interval: ignored; from it on: one woken poll, armed again (until it fails in turn)
    expect(Coalesce.wake(disarmed, 5999, 1000)[0]).toBe("ignored")
    const [decision, after] = Coalesce.wake(disarmed, 6000, 1000)
    expect([decision, after.armed, after.waiting]).toEqual(["pollNow", true, true])
    // without an interval (the default), only a poll that succeeds re-arms them
    expect(Coalesce.wake(disarmed, 1e12)[0]).toBe("ignored")
    // never while a poll is in flight
    expect(Coalesce.wake(Coalesce.started(disarmed, 5000), 9000, 1000)[0]).toBe("ignored")
  })

  it("a scheduled poll that fails does not disarm wakes (a wake is not to blame)", () => {
    expect(run(["start", "fail", "wake"])).toEqual(["sleep", "pollNow"])
  })

  it("delayMillis spaces woken polls by the minimum interval from the last start", () => {
    const state = Coalesce.started(Coalesce.initial, 1000)
    expect(Coalesce.delayMillis(Coalesce.initial, 50, 0)).toBe(0)
    expect(Coalesce.delayMillis(state, 50, 1010)).toBe(40)
    expect(Coalesce.delayMillis(state, 50, 1050)).toBe(0)
    expect(Coalesce.delayMillis(state, 50, 2000)).toBe(0)
  })
})
