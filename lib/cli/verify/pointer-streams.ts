// Consume-queue units and index entries point into the commit log. Each file of them is a stream
// in its own order; a heap merges the streams by the commit-log offset they point at, so that one
// sequential walk of the commit log meets each pointer at the record it names. Pointers that do
// not arrive in order (a damaged file) are checked with a random read instead.
import type { DispatchRequest } from '../../store/commitlog/record.js'
import type { CommitLogReader } from './record-reader.js'

/** A stream of pointers into the commit log (units or entries), in the order the file holds them. */
export interface PointerStream {
  /** Commit-log offset the current pointer points at. */
  phy: number
  /** Moves to the next pointer; false when the stream is exhausted. */
  advance(): boolean
  /** The pointer's target is below the commit log's first file. */
  expired(): void
  /** The pointer's target is this valid record. */
  match(req: DispatchRequest): void
  /** There is no valid record at the pointer's target; `reason` completes "points at offset N, ...". */
  miss(reason: string): void
}

/** Streams ordered by the commit-log offset of their current pointer. */
export class MinHeap {
  private readonly items: PointerStream[] = []

  get size(): number {
    return this.items.length
  }

  peek(): PointerStream | undefined {
    return this.items[0]
  }

  push(s: PointerStream): void {
    const a = this.items
    a.push(s)
    let i = a.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (a[parent].phy <= s.phy) break
      a[i] = a[parent]
      i = parent
    }
    a[i] = s
  }

  pop(): PointerStream | undefined {
    const a = this.items
    const top = a[0]
    const last = a.pop()
    if (top === undefined || last === undefined || a.length === 0) return top
    let i = 0
    for (;;) {
      const l = 2 * i + 1
      if (l >= a.length) break
      const r = l + 1
      const c = r < a.length && a[r].phy < a[l].phy ? r : l
      if (a[c].phy >= last.phy) break
      a[i] = a[c]
      i = c
    }
    a[i] = last
    return top
  }
}

/** Where the walk ended, once it has. */
export interface WalkEnd {
  validEnd: number
  /** The walk ended at the end of the data with nothing after it: the log may only have grown since. */
  endIsClean: boolean
}

/** Merges pointer streams into the commit-log walk. */
export class PointerMerge {
  private readonly heap = new MinHeap()
  private lastStart = -1
  private lastSize = 0
  private end: WalkEnd | null = null
  /** A pointer beyond the end of the walk found a valid record: the store was written meanwhile. */
  grewDuringCheck = false

  constructor(
    private readonly reader: CommitLogReader,
    /** Start of the first commit-log file: pointers below it have expired. */
    private readonly minOffset: number,
  ) {}

  add(stream: PointerStream): void {
    if (stream.advance()) this.heap.push(stream)
  }

  /** The walk is at the valid record at `at`: settles every pointer up to it. */
  onRecord(at: number, req: DispatchRequest): void {
    const heap = this.heap
    for (let top = heap.peek(); top !== undefined && top.phy <= at; top = heap.peek()) {
      heap.pop()
      if (top.phy === at) top.match(req)
      else this.settlePassed(top)
      if (top.advance()) heap.push(top)
    }
    this.lastStart = at
    this.lastSize = req.size
  }

  /** The walk is over: settles every pointer left. */
  finish(end: WalkEnd): void {
    this.end = end
    for (let top = this.heap.pop(); top !== undefined; top = this.heap.pop()) {
      this.settlePassed(top)
      if (top.advance()) this.heap.push(top)
    }
  }

  /** A pointer whose target the walk has already passed (or that lies beyond the walk's end). */
  private settlePassed(s: PointerStream): void {
    const u = s.phy
    if (u < this.minOffset) {
      s.expired()
      return
    }
    const end = this.end
    if (end !== null && u >= end.validEnd) {
      if (!end.endIsClean) {
        s.miss(`beyond the end of valid commit-log data (${end.validEnd})`)
        return
      }
      // Written after the walk passed that point (a live store): check it as it is now.
      const req = this.reader.recordAt(u)
      if (typeof req === 'string') {
        s.miss(`beyond the end of valid commit-log data (${end.validEnd})`)
      } else {
        this.grewDuringCheck = true
        s.match(req)
      }
      return
    }
    if (this.lastStart >= 0 && u > this.lastStart) {
      s.miss(u < this.lastStart + this.lastSize ? `inside the record at ${this.lastStart}` : 'in the unused end of a file')
      return
    }
    if (this.lastStart < 0) {
      s.miss('where no record starts')
      return
    }
    const req = this.reader.recordAt(u)
    if (typeof req === 'string') s.miss(`where no valid record starts (${req})`)
    else s.match(req)
  }
}
