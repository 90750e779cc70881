// The `arrivals` file in the store root: how the writer wakes readers in other processes. Units the
// writer dispatches land in its mappings, and a write through a mapping raises no file-change event,
// so after a dispatch pass that wrote units the writer also writes one byte to this file with a
// system call. Readers watch it (fs.watch: inotify, kqueue, FSEvents) and look at the queues they
// wait on when it changes, and sleep otherwise.
//
// The content means nothing: one byte at position 0, overwritten, so the file never grows and the
// event is what counts. The writer creates it at open and never removes it (a reader's watch stays on
// the same inode across writer restarts). RocketMQ ignores unknown files in the store root.
//
// Cost: at most one pwrite per dispatch pass and at most one per TOUCH_GAP_MS (a trailing touch
// covers units dispatched inside the gap), so at most ~1,000 small page-cache writes a second under
// a steady stream, whether or not a reader exists: a writer cannot tell readers apart without them
// writing to the store, which they never do.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'

/** The least time between two touches (ms); units dispatched in between are covered by one trailing touch. */
export const TOUCH_GAP_MS = 1

const BYTE = Buffer.from([0x2a])
const RESOLVED = Promise.resolve()

/** The writer's side: touches the file after dispatch passes that wrote units. */
export class ArrivalsFile {
  /** Touches made since open. */
  touches = 0
  private fd: number | null = null
  private pending = false
  private timer: NodeJS.Timeout | null = null
  private lastTouch = Number.NEGATIVE_INFINITY

  constructor(
    readonly path: string,
    private readonly log: (message: string) => void,
  ) {
    try {
      // Neither truncated nor appended: a reader's watch and the file's single byte stay as they are.
      this.fd = fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_CREAT, 0o644)
    } catch (error) {
      this.fail(error)
    }
  }

  /** A unit was dispatched: one touch once this synchronous pass is over (or after the gap). */
  arrived(): void {
    if (this.fd === null || this.pending || this.timer !== null) return
    this.pending = true
    // A resolved promise's reaction rather than queueMicrotask, which makes an async resource per call.
    void RESOLVED.then(this.afterPass)
  }

  private readonly afterPass = (): void => {
    this.pending = false
    if (this.fd === null || this.timer !== null) return
    const wait = this.lastTouch + TOUCH_GAP_MS - performance.now()
    if (wait <= 0) {
      this.touch()
      return
    }
    this.timer = setTimeout(() => {
      this.timer = null
      this.touch()
    }, Math.ceil(wait))
    // Close makes the owed touch: this timer keeps no process alive.
    this.timer.unref()
  }

  private touch(): void {
    if (this.fd === null) return
    this.lastTouch = performance.now()
    try {
      fs.writeSync(this.fd, BYTE, 0, 1, 0)
      this.touches++
    } catch (error) {
      this.fail(error)
    }
  }

  /** Readers then fall back to their slow poll; the store itself is unaffected. */
  private fail(error: unknown): void {
    if (this.fd !== null) fs.closeSync(this.fd)
    this.fd = null
    this.log(`readers in other processes are not woken (they poll instead): ${this.path}: ${(error as Error)?.message ?? String(error)}`)
  }

  /** Makes a touch still owed, then closes the file (it stays in the store). */
  close(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer)
      this.timer = null
      this.touch()
    }
    if (this.fd === null) return
    const fd = this.fd
    this.fd = null
    fs.closeSync(fd)
  }
}

/** The reader's side: a watch on the file; null when it cannot be watched now (missing, or a file system without events). */
export function watchArrivals(path: string, onChange: () => void, onLost: () => void): fs.FSWatcher | null {
  let watcher: fs.FSWatcher
  try {
    // Not persistent: what keeps a waiting reader's process alive is its fallback timer.
    watcher = fs.watch(path, { persistent: false })
  } catch {
    return null
  }
  watcher.on('change', (event) => {
    // A rename or removal leaves the watch on an inode the writer no longer writes.
    if (event === 'rename') onLost()
    else onChange()
  })
  watcher.on('error', () => onLost())
  return watcher
}
