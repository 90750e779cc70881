// The records a put fills, reused from one put to the next: a record object of some 200 bytes per
// message was the largest thing a put allocated. A put takes slot i for the i-th message of the
// slice it builds, and releases the slots once its last slice is appended and dispatched.
import { EncodedRecord } from './record.js'

export class RecordSlots {
  private readonly records: EncodedRecord[] = []
  private used = 0

  /** With `count` slots made now (more are made when a put asks for them). */
  constructor(count = 0) {
    for (let i = 0; i < count; i++) this.records.push(new EncodedRecord())
  }

  /** Slot `i`: valid until the next take(i) or release(). */
  take(i: number): EncodedRecord {
    while (this.records.length <= i) this.records.push(new EncodedRecord())
    if (i >= this.used) this.used = i + 1
    return this.records[i]
  }

  /** Drops what the used slots still hold of the messages (bodies, strings): nothing stays reachable. */
  release(): void {
    for (let i = 0; i < this.used; i++) this.records[i].forget()
    this.used = 0
  }
}
