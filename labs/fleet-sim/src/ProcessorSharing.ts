/**
 * The database as a processor-sharing server: `cores` queries run at full speed; with `n > cores` active
 * queries each runs at `cores / n` of full speed (optionally slowed further by a contention factor), so a
 * query's service time grows once the active backends exceed the cores. Implemented with virtual time:
 * every job progresses at the same rate, so the order of completions is fixed at admission and one heap
 * keyed by virtual finish time gives the next completion. A cancelled job (a statement timeout) leaves the
 * server at once; its heap entry is dropped when it reaches the top.
 *
 * @since 0.1.0
 */
import { EventQueue } from "./EventQueue.ts"

/**
 * A processor-sharing server over `cores` with an optional contention factor `k`: the speed of each of
 * `n` jobs is `min(1, cores / n) / (1 + k · max(0, n − cores) / cores)`.
 *
 * @since 0.1.0
 */
export class ProcessorSharing {
  /** Jobs in service, including the `external` ones that never finish on their own. */
  jobs = 0
  /** Jobs that load the server but are not in the heap (a load spike's long queries). */
  external = 0
  private virtual = 0
  private last = 0
  private readonly heap = new EventQueue(1024)
  private tokens = 0
  private readonly cancelled = new Set<number>()

  readonly cores: number
  readonly contention: number

  constructor(cores: number, contention: number) {
    this.cores = cores
    this.contention = contention
  }

  /** The speed of each job when `n` are in service. */
  speed(n: number): number {
    if (n <= this.cores) return 1
    return (this.cores / n) / (1 + this.contention * (n - this.cores) / this.cores)
  }

  /** Advances virtual time to real time `now` (call before any change). */
  advance(now: number): void {
    if (now > this.last) {
      if (this.jobs > 0) this.virtual += (now - this.last) * this.speed(this.jobs)
      this.last = now
    }
  }

  /** Admits job `id` with `work` milliseconds of full-speed work at `now`; returns its token for {@link cancel}. */
  add(now: number, id: number, work: number): number {
    this.advance(now)
    const token = this.tokens
    this.tokens = (this.tokens + 1) | 0
    this.heap.push(this.virtual + work, 0, id, token)
    this.jobs++
    return token
  }

  /** Removes the job admitted with `token` at `now`, before it completes (it must still be in service). */
  cancel(now: number, token: number): void {
    this.advance(now)
    this.jobs--
    this.cancelled.add(token)
  }

  /** Adds (positive) or removes (negative) external load at `now`. */
  addExternal(now: number, count: number): void {
    this.advance(now)
    this.jobs += count
    this.external += count
  }

  /** Real time of the next completion, or `Infinity`. */
  nextCompletion(): number {
    while (this.cancelled.size > 0 && this.heap.size > 0 && this.cancelled.delete(this.heap.peekTag())) this.heap.pop()
    if (this.heap.size === 0) return Infinity
    const remaining = this.heap.peekTime() - this.virtual
    return remaining <= 0 ? this.last : this.last + remaining / this.speed(this.jobs)
  }

  /** Removes the next completing job at `now` and returns its id. */
  complete(now: number): number {
    this.advance(now)
    this.heap.pop()
    this.jobs--
    return this.heap.poppedSubject
  }
}
