/**
 * The simulator's event queue: a binary min-heap of timed events kept in typed arrays, so that scheduling
 * and popping an event allocates nothing. Ties in time pop in insertion order, which keeps a seeded run
 * deterministic.
 *
 * @since 0.1.0
 */

/**
 * A mutable binary heap of events `(time, kind, subject, tag)`; `kind`, `subject` and `tag` are small
 * integers whose meaning belongs to the caller.
 *
 * @since 0.1.0
 */
export class EventQueue {
  /** Number of queued events. */
  size = 0
  private time: Float64Array
  private order: Float64Array
  private kind: Int32Array
  private subject: Int32Array
  private tag: Int32Array
  private sequence = 0
  /** The popped event's fields, valid until the next `pop`. */
  poppedTime = 0
  poppedKind = 0
  poppedSubject = 0
  poppedTag = 0

  constructor(capacity = 1024) {
    this.time = new Float64Array(capacity)
    this.order = new Float64Array(capacity)
    this.kind = new Int32Array(capacity)
    this.subject = new Int32Array(capacity)
    this.tag = new Int32Array(capacity)
  }

  /** The time of the earliest event, or `Infinity` when empty. */
  peekTime(): number {
    return this.size === 0 ? Infinity : this.time[0]!
  }

  /** The tag of the earliest event (the queue must not be empty). */
  peekTag(): number {
    return this.tag[0]!
  }

  /** Schedules an event. */
  push(time: number, kind: number, subject: number, tag: number): void {
    if (this.size === this.time.length) this.grow()
    const order = this.sequence++
    let i = this.size++
    const times = this.time
    const orders = this.order
    while (i > 0) {
      const parent = (i - 1) >> 1
      const pt = times[parent]!
      if (pt < time || (pt === time && orders[parent]! < order)) break
      this.move(parent, i)
      i = parent
    }
    this.place(i, time, order, kind, subject, tag)
  }

  /** Removes the earliest event into the `popped*` fields; returns false when empty. */
  pop(): boolean {
    if (this.size === 0) return false
    this.poppedTime = this.time[0]!
    this.poppedKind = this.kind[0]!
    this.poppedSubject = this.subject[0]!
    this.poppedTag = this.tag[0]!
    const last = --this.size
    if (last === 0) return true
    const time = this.time[last]!
    const order = this.order[last]!
    const kind = this.kind[last]!
    const subject = this.subject[last]!
    const tag = this.tag[last]!
    const times = this.time
    const orders = this.order
    let i = 0
    const half = last >> 1
    while (i < half) {
      let child = 2 * i + 1
      const right = child + 1
      if (
        right < last
        && (times[right]! < times[child]! || (times[right] === times[child] && orders[right]! < orders[child]!))
      ) child = right
      const ct = times[child]!
      if (time < ct || (time === ct && order < orders[child]!)) break
      this.move(child, i)
      i = child
    }
    this.place(i, time, order, kind, subject, tag)
    return true
  }

  private place(i: number, time: number, order: number, kind: number, subject: number, tag: number): void {
    this.time[i] = time
    this.order[i] = order
    this.kind[i] = kind
    this.subject[i] = subject
    this.tag[i] = tag
  }

  private move(from: number, to: number): void {
    this.time[to] = this.time[from]!
    this.order[to] = this.order[from]!
    this.kind[to] = this.kind[from]!
    this.subject[to] = this.subject[from]!
    this.tag[to] = this.tag[from]!
  }

  private grow(): void {
    const capacity = this.time.length * 2
    const grow64 = (a: Float64Array) => {
      const b = new Float64Array(capacity)
      b.set(a)
      return b
    }
    const grow32 = (a: Int32Array) => {
      const b = new Int32Array(capacity)
      b.set(a)
      return b
    }
    this.time = grow64(this.time)
    this.order = grow64(this.order)
    this.kind = grow32(this.kind)
    this.subject = grow32(this.subject)
    this.tag = grow32(this.tag)
  }
}
