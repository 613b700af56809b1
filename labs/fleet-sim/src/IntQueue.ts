/**
 * A growable FIFO ring buffer of integer pairs `(value, tag)`, for the pooler's queues: no allocation per
 * element.
 *
 * @since 0.1.0
 */

/**
 * A FIFO of `(value, tag)` integer pairs.
 *
 * @since 0.1.0
 */
export class IntQueue {
  private values: Int32Array
  private tags: Int32Array
  private head = 0
  /** Number of queued pairs. */
  length = 0
  /** The shifted pair, valid until the next `shift`. */
  shiftedValue = 0
  shiftedTag = 0

  constructor(capacity = 1024) {
    this.values = new Int32Array(capacity)
    this.tags = new Int32Array(capacity)
  }

  /** Appends a pair. */
  push(value: number, tag: number): void {
    if (this.length === this.values.length) this.grow()
    const i = (this.head + this.length) % this.values.length
    this.values[i] = value
    this.tags[i] = tag
    this.length++
  }

  /** Removes the oldest pair into `shiftedValue`/`shiftedTag`; returns false when empty. */
  shift(): boolean {
    if (this.length === 0) return false
    this.shiftedValue = this.values[this.head]!
    this.shiftedTag = this.tags[this.head]!
    this.head = (this.head + 1) % this.values.length
    this.length--
    return true
  }

  private grow(): void {
    const capacity = this.values.length * 2
    const values = new Int32Array(capacity)
    const tags = new Int32Array(capacity)
    for (let k = 0; k < this.length; k++) {
      const i = (this.head + k) % this.values.length
      values[k] = this.values[i]!
      tags[k] = this.tags[i]!
    }
    this.values = values
    this.tags = tags
    this.head = 0
  }
}
