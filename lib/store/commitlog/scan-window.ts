// The bytes a recovery scan looks at, a window at a time. The scan reads every byte of the files
// it walks once, in order. Through a mapping, the first touch of each page costs the scanning
// thread a fault, and in a virtual machine an exit even when the page was faulted in ahead on
// another thread: on the bench machine 0.34 s per GiB after a populate and 0.55 s without, against
// 0.1 s for positioned reads of the same bytes into one reused buffer, which also leaves them in
// the CPU's cache for the checks that follow. So a source that can copy (WindowSource.readInto) is
// read into a window of WINDOW_BYTES that moves along the file; the window is moved to the start
// of a record whose end it does not hold, and grown for a record larger than itself. Sources that
// cannot copy, and records too large for a copy (a damaged TOTALSIZE may claim anything), are read
// through read()'s views instead: the same bytes, so the scan decides the same way either way.
import { Buffer } from 'node:buffer'

/** What a window reads from: the files of a scan (recovery-scan.ts's ScanSource is one). */
export interface WindowSource {
  /** Bytes [from, to) of file `index`, fewer at the end of what the file holds (a view where it can). */
  read(index: number, from: number, to: number): Buffer
  /**
   * Copies bytes [from, from + target.length) of file `index` into `target` (fewer at the end of
   * what the file holds) and returns how many. A source with it is scanned through a window it
   * fills; one without, through read()'s views.
   */
  readInto?(index: number, from: number, target: Buffer): number
  /** Bytes the scan reads at a time (default WINDOW_BYTES). */
  readonly windowBytes?: number
}

/** Bytes copied per window move. Within the CPU's cache, so the checks read what was just copied. */
export const WINDOW_BYTES = 1024 * 1024
/** A record larger than this many windows is read through the source's view rather than copied. */
const MAX_COPY_WINDOWS = 16
const EMPTY = Buffer.alloc(0)

export class ScanWindow {
  /** File bytes [start, start + bytes.length) of file `index`. */
  bytes: Buffer = EMPTY
  start = 0
  private index = -1
  /** The window ends where the file's readable bytes end. */
  private atEnd = false
  private storage: Buffer = EMPTY
  private readonly windowBytes: number
  private readonly maxCopyBytes: number

  constructor(private readonly src: WindowSource) {
    this.windowBytes = Math.max(64, src.windowBytes ?? WINDOW_BYTES)
    this.maxCopyBytes = MAX_COPY_WINDOWS * this.windowBytes
  }

  /**
   * Makes the window hold bytes [pos, pos + need) of file `index`, or as many of them as the file
   * holds; returns pos's position in `bytes`.
   */
  hold(index: number, pos: number, need: number): number {
    const rel = pos - this.start
    if (index === this.index && rel >= 0 && (rel + need <= this.bytes.length || (this.atEnd && rel <= this.bytes.length))) return rel
    this.move(index, pos, need)
    return 0
  }

  /** Lets go of the bytes (a view of a mapping stays reachable otherwise). */
  release(): void {
    this.bytes = EMPTY
    this.storage = EMPTY
    this.index = -1
  }

  private move(index: number, pos: number, need: number): void {
    const want = Math.max(this.windowBytes, need)
    const src = this.src
    if (src.readInto !== undefined && want <= this.maxCopyBytes) {
      if (this.storage.length < want) this.storage = Buffer.allocUnsafeSlow(want)
      const target = this.storage.length === want ? this.storage : this.storage.subarray(0, want)
      this.bytes = this.storage.subarray(0, src.readInto(index, pos, target))
    } else {
      this.bytes = src.read(index, pos, pos + want)
    }
    this.index = index
    this.start = pos
    this.atEnd = this.bytes.length < want
  }
}
