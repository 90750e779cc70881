// The parts of a MappedFile's mapping life that need none of its positions: a lazy file's length is
// checked at open with a stat (no descriptor, no mapping until the first use); whether a file may
// be unmapped now is decided from a few facts about it (MappedFile.unmapIfIdle gathers them); the
// private mapping that zero-copy reads hand out; and the file's age, read from the file system.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'

import { ioError } from '../../errors.js'
import { native, type MapHandle } from '../../native.js'
import { descriptors } from './descriptors.js'
import { checkLength } from './segment-io.js'

/** Checks the length of a file opened lazily: one stat, no descriptor, no mapping. */
export function checkLazyLength(fileName: string, fileSize: number): void {
  let length: number
  try {
    length = fs.statSync(fileName).size
  } catch (cause) {
    throw ioError(`cannot open ${fileName}`, cause)
  }
  checkLength(fileName, length, fileSize)
}

/** What decides whether a mapped file may be unmapped now. */
export interface IdleFacts {
  /** References: 1 is the owner alone; more are readers, flushes in flight or warm-ups. */
  refCount: number
  /** False once shut down: cleanup, not the budget, unmaps it then. */
  available: boolean
  /** A transient-pool buffer is attached: its bytes reach the file only through commits. */
  hasWriteBuffer: boolean
  /** Warmed (maybe mlocked) and still taking appends: newly reserved chunks are warmed through the mapping. */
  warmedAndOpen: boolean
  /** Views of the private mapping may be in users' hands (zero-copy reads). */
  exposed: boolean
  /** Bytes readers may see that are not forced to disk yet. */
  unflushedBytes: number
  /** Idle only once flushed (commit-log and compaction-log files: see MappedFileOptions.unmapOnlyFlushed). */
  unmapOnlyFlushed: boolean
}

/** True when unmapping the file now loses nothing and strands no reader or writer. */
export function isIdle(facts: IdleFacts): boolean {
  if (facts.refCount !== 1 || !facts.available || facts.hasWriteBuffer) return false
  if (facts.warmedAndOpen || facts.exposed) return false
  return !(facts.unmapOnlyFlushed && facts.unflushedBytes > 0)
}

/** A segment size must be a positive integer. */
export function assertFileSize(fileSize: number): void {
  if (!Number.isSafeInteger(fileSize) || fileSize <= 0) {
    throw new RangeError(`file size must be a positive integer, got ${fileSize}`)
  }
}

/**
 * A second, private copy-on-write mapping of a file, made on demand, whose views may be handed to
 * users (zero-copy reads: MappedFile.exposedBuffer). A view whose ArrayBuffer was transferred away
 * empties ours, so a new mapping replaces it (the old one becomes anonymous memory at close, see
 * native/mapping.h). While it exists the file is never idle: only close or deletion ends it.
 */
export class PrivateMapping {
  private out: { handle: MapHandle; view: Buffer } | null = null

  get isOpen(): boolean {
    return this.out !== null
  }

  /** A view of the whole file through the private mapping, mapped now if need be. */
  view(fileName: string, fileSize: number): Buffer {
    let out = this.out
    if (out !== null && out.view.length !== fileSize) {
      out.handle.close()
      out = null
    }
    if (out === null) {
      const handle = descriptors.use(fileName, false, (fd) => native.map(fd, fileSize, false))
      out = { handle, view: Buffer.from(handle.buffer, 0, fileSize) }
      this.out = out
    }
    return out.view
  }

  close(): void {
    this.out?.handle.close()
    this.out = null
  }
}

/** A file's modification time in ms, as the file system reports it (0 if it is gone). */
/**
 * A Buffer over at least [0, end) of a handle's mapping, at most `fileSize` long: the handle's
 * buffer, or a wider one it exposes (MapHandle.expose).
 */
export function exposedPart(handle: MapHandle, fileSize: number, end: number): Buffer {
  const buffer = end > handle.buffer.byteLength ? handle.expose(Math.min(end, fileSize)) : handle.buffer
  return Buffer.from(buffer, 0, Math.min(buffer.byteLength, fileSize))
}

export function modifiedTimeMs(fileName: string): number {
  try {
    return fs.statSync(fileName).mtimeMs
  } catch {
    return 0
  }
}
