/**
 * Where a record's claim along starts its walk of the items never timed (`queue_claim`'s `ready`, in id order).
 *
 * A walk from the start of the queue passes, on every record, the first item of every unit this process holds and
 * every index entry that items processed since the last vacuum left behind: at 3,600 jobs/s, 3–6 ms of a record's
 * 5–7 ms for 25 units (docs/results/job-queue-harness.md). After a claim, every unit whose first item is older than
 * the newest first item it claimed was claimed, held by someone, or locked by a concurrent claim: so the next
 * record's walk may start after it. What the cursor can miss is a unit that becomes claimable behind it (released by
 * another instance with items left, freed by a stale cleanup, an insert that committed late); a walk from the start
 * at least once per `refreshMillis` finds those, so they wait at most that long, and every poll walks from the start.
 *
 * The decisions are pure functions of the state and the time (as `Scheduling`'s); the deriver keeps the state.
 *
 * @internal
 */

/** The cursor: the id the next walk starts after (0: from the start), and when the last walk from the start began. */
export interface State {
  readonly after: bigint
  readonly fullAtMillis: number
}

/** No walk yet: the first starts from the start. */
export const initial: State = { after: 0n, fullAtMillis: -Infinity }

/** One walk: the id it starts after, and whether that is the start of the queue. */
export interface Walk {
  readonly after: bigint
  readonly full: boolean
}

/** The walk of a claim at `nowMillis`: from the start when the last one from the start is `refreshMillis` old. */
export const walkAt = (state: State, nowMillis: number, refreshMillis: number): Walk =>
  state.after === 0n || nowMillis - state.fullAtMillis >= refreshMillis
    ? { after: 0n, full: true }
    : { after: state.after, full: false }

/**
 * The state after `walk` began at `nowMillis` and claimed units whose first items are `firstIds` (the items'
 * `bigint` ids as text): the newest of them, or for a walk from the start that claimed nothing, the start again.
 */
export const advance = (
  state: State,
  walk: Walk,
  firstIds: ReadonlyArray<string>,
  nowMillis: number
): State => {
  let newest = walk.after
  for (const id of firstIds) {
    const value = BigInt(id)
    if (value > newest) newest = value
  }
  return walk.full ? { after: newest, fullAtMillis: nowMillis } : { after: newest, fullAtMillis: state.fullAtMillis }
}
