// Huge pages for the commit-log chunks ahead of a fast writer, given back when it slows down.
//
// The chunks reserved ahead of the writer are faulted in on the libuv pool, page by page: about
// 2.3 us a 4 KiB page in a virtual machine, CPU time the pool takes from the rest of a machine
// with few cores. A huge page (2 MiB) is faulted in at once, at about a quarter of that per byte,
// and mapped again by one fault when a reader comes back to it. But the kernel writes a huge page back
// whole, and a write to it after a write-back makes all of it dirty again: a writer that adds a few
// records between two flushes would make each flush write 2 MiB. So huge pages go only ahead of a
// writer that fills a reservation step within a flush interval, only where the flusher syncs at
// intervals (ASYNC_FLUSH, writes through the mapping), and a timed flush pass that finds the writer
// slower than a huge page per interval gives the ranges ahead of it back to small pages (written
// back, dropped from the page cache, faulted in again). A writer at the threshold writes at most
// about twice its bytes.
import * as fs from 'node:fs'

import type { Advice, MapHandle } from '../../native.js'
import { adviseRange } from '../mapped/segment-io.js'

/** What the policy needs of a commit-log file (a MappedFile). */
export interface HugePageFile {
  readonly fileFromOffset: number
  readonly wrotePosition: number
  evictRange(from: number, to: number, advice: Advice): void
}

/** A range of a file advised huge and not given back yet. */
interface HugeRange {
  file: HugePageFile
  from: number
  to: number
}

/**
 * The size of a huge page that a file mapping can get here (Linux with transparent huge pages not
 * set to never); 0 where there is none, and then the store advises none.
 */
export function transparentHugePageBytes(): number {
  hugePageBytes ??= readHugePageBytes()
  return hugePageBytes
}

let hugePageBytes: number | undefined

function readHugePageBytes(): number {
  if (process.platform !== 'linux') return 0
  try {
    const enabled = fs.readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8')
    if (enabled.includes('[never]')) return 0
    const size = Number(fs.readFileSync('/sys/kernel/mm/transparent_hugepage/hpage_pmd_size', 'utf8').trim())
    return Number.isSafeInteger(size) && size > 0 ? size : 0
  } catch {
    return 0
  }
}

export class HugePagesAhead {
  /** When the last reservation step was faulted in, and how many bytes it had. */
  private lastStepAt = Number.NEGATIVE_INFINITY
  private lastStepBytes = 0
  /** Set by a pass that found the writer slow; cleared by a step the writer filled within an interval. */
  private slow = false
  private readonly ranges: HugeRange[] = []
  /** The last timed pass: when (NaN before the first), and the log's write offset then. */
  private passAt = Number.NaN
  private passWrote = 0

  /** `intervalMs`: the flusher's interval (flushIntervalCommitLog); `pageBytes`: transparentHugePageBytes(). */
  constructor(
    private readonly intervalMs: number,
    private readonly pageBytes: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** MappedFileOptions.warmChunk: faults [from, to) of `file` in, as huge pages while the writer is fast. */
  readonly warmChunk = (file: object, handle: MapHandle, from: number, to: number): Promise<void> => {
    // A file's first chunk (MappedFile.warm) is faulted in when the file is made, ahead of the
    // writer, and says nothing of its pace. It is advised as the steps are, so that no read-ahead
    // of small pages runs from it into the chunks the writer's steps advise huge.
    if (from > 0) {
      const now = this.now()
      if (this.lastStepBytes >= this.pageBytes && now - this.lastStepAt <= this.intervalMs) this.slow = false
      this.lastStepAt = now
      this.lastStepBytes = to - from
    }
    const page = this.pageBytes
    const start = Math.ceil(from / page) * page
    const end = Math.floor(to / page) * page
    if (!this.slow && end > start && adviseRange(handle, start, end, 'hugepage')) this.note(file as HugePageFile, start, end)
    return handle.warmAsync(from, to - from)
  }

  /**
   * A timed flush pass over the log whose last file is `last`: a writer slower than a huge page per
   * interval since the last pass gets the huge pages ahead of it back as small ones.
   */
  pass(last: HugePageFile | null): void {
    const now = this.now()
    const wrote = last === null ? 0 : last.fileFromOffset + last.wrotePosition
    const elapsed = now - this.passAt
    // A pass too soon after the last cannot tell a slow writer from a short interval.
    if (elapsed < this.intervalMs / 2) return
    const slow = (wrote - this.passWrote) * this.intervalMs < this.pageBytes * elapsed
    this.passAt = now
    this.passWrote = wrote
    // The first pass only starts the count.
    if (Number.isNaN(elapsed)) return
    // Ranges of files before the last are full: records only, none written again.
    const current = (range: HugeRange): boolean => last === null || range.file.fileFromOffset >= last.fileFromOffset
    if (!slow) {
      if (!this.ranges.every(current)) this.ranges.splice(0, this.ranges.length, ...this.ranges.filter(current))
      return
    }
    this.slow = true
    for (const range of this.ranges) {
      if (!current(range)) continue
      // In the file being written, from the huge page the writer is in (its records are written back first).
      const from = range.file === last ? Math.max(range.from, Math.floor(last.wrotePosition / this.pageBytes) * this.pageBytes) : range.from
      if (from < range.to) range.file.evictRange(from, range.to, 'nohugepage')
    }
    this.ranges.length = 0
  }

  private note(file: HugePageFile, from: number, to: number): void {
    const joined = this.ranges.find((range) => range.file === file && range.to >= from && range.from <= to)
    if (joined === undefined) this.ranges.push({ file, from, to })
    else {
      joined.from = Math.min(joined.from, from)
      joined.to = Math.max(joined.to, to)
    }
  }
}
