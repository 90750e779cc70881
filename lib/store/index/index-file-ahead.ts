// The next index file, made ahead of the key that needs it. A new file is created, sized, given
// its first blocks, synced and mapped: system calls that may each wait for the file system's
// journal or the disk, and a roll (or a new store's first key) made them inside a put. Made here
// on the libuv pool instead, the file is ready when the roll comes; a roll that comes first makes
// its own as before.
//
// Durable as a file made on the JS thread is (segment-io.ts's createSegment): made as `<name>.tmp`,
// synced, renamed, its folder synced, so a reader listing the folder never meets a short file under
// an index name and a crash leaves at most a `.tmp` (load removes it). Its first flush is then an
// ordinary one: a full sync there would also clean the slot table's pages, and the writer's next
// key into each would fault (see IndexFile.syncEntriesAsync).
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { basename, join } from 'node:path'

import { native, type MapHandle } from '../../native.js'
import { removeQuietly, syncDirectoryAsync, syncFileAsync } from '../mapped/directory.js'
import { createMappedSegmentAsync } from '../mapped/segment-io.js'
import { formatIndexFileName, INDEX_HEADER_SIZE, parseIndexFileName } from './index-layout.js'

/**
 * Entries left in a file when the next one starts being made: the index's write-back kick, which
 * starts it, comes every 65,536 keys (IndexService.kickWriteback), so it sees each file twice here.
 */
export const AHEAD_ENTRIES = 131_072
/** Entries left in the last file below which dispatch waits for a file being made rather than make one. */
export const WAIT_FOR_FILE_ENTRIES = 64

/** A file made ahead and not taken yet. */
export interface MadeIndexFile {
  path: string
  handle: MapHandle
}

export class IndexFileAhead {
  private made: MadeIndexFile | null = null
  /** The creation under way, if any. */
  private makingFile: Promise<void> | null = null
  /** A roll made its file itself meanwhile: the one under way would sort before it, and goes. */
  private superseded = false
  /** The millisecond of the newest name given out or seen: names only move forward. */
  private lastNameMillis = 0
  private closed = false

  constructor(
    private readonly indexDir: string,
    readonly fileSize: number,
  ) {}

  /** The creation under way (settles when it ends, made or not), or null. */
  get making(): Promise<void> | null {
    return this.makingFile
  }

  /** A roll made its own file: the one under way, if any, is deleted when made. */
  supersede(): void {
    if (this.makingFile !== null) this.superseded = true
  }

  /** Notes an existing file's name, so that no later name sorts before it. */
  noteName(path: string): void {
    const millis = parseIndexFileName(basename(path))
    if (millis !== null && millis > this.lastNameMillis) this.lastNameMillis = millis
  }

  /**
   * A name (local creation time, to the millisecond) that sorts after `lastPath` and every name
   * given out before, and exists nowhere in the folder: two files within one millisecond, or a
   * clock that stepped back, move the name forward one millisecond at a time instead of reusing one.
   */
  nextFileName(lastPath: string | null): string {
    let millis = Math.max(Date.now(), this.lastNameMillis + 1)
    const lastName = lastPath === null ? '' : basename(lastPath)
    for (;;) {
      const name = formatIndexFileName(millis)
      const path = join(this.indexDir, name)
      if (name > lastName && !fs.existsSync(path) && !fs.existsSync(`${path}.tmp`)) {
        this.lastNameMillis = millis
        return path
      }
      millis += 1
    }
  }

  /** Starts making the file after `lastPath` (null: the first), unless one is made or under way. */
  start(lastPath: string | null): void {
    if (this.closed || this.made !== null || this.makingFile !== null) return
    // A file that cannot be made here is made by the roll, which reports why it cannot.
    let path: string
    try {
      fs.mkdirSync(this.indexDir, { recursive: true })
      path = this.nextFileName(lastPath)
    } catch {
      return
    }
    const temp = `${path}.tmp`
    const page = native.pageSize
    this.superseded = false
    this.makingFile = createMappedSegmentAsync(temp, this.fileSize, page, page)
      .then((handle) => this.keep(path, temp, handle))
      .catch(() => {
        removeQuietly(temp)
        removeQuietly(path)
      })
      .finally(() => {
        this.makingFile = null
      })
  }

  /**
   * The file made ahead, for a roll whose previous file is `lastPath`; null when none is ready,
   * or when the one made sorts before `lastPath` (a roll that could not wait made a newer file
   * meanwhile): that one is deleted.
   */
  take(lastPath: string | null): MadeIndexFile | null {
    const made = this.made
    if (made === null) return null
    this.made = null
    if (lastPath === null || basename(made.path) > basename(lastPath)) return made
    drop(made)
    return null
  }

  /** Waits for a creation under way (tests, close). */
  async settle(): Promise<void> {
    await this.makingFile
  }

  /** No more files: one made and not taken is unmapped and deleted, and so is one still under way when it ends. */
  close(): void {
    this.closed = true
    if (this.made !== null) drop(this.made)
    this.made = null
  }

  /** Makes the new file durable under its name and keeps it, unless no longer wanted (then deleted); throws with the handle closed. */
  private async keep(path: string, temp: string, handle: MapHandle): Promise<void> {
    try {
      await syncFileAsync(temp)
      if (!this.wanted()) {
        handle.close()
        removeQuietly(temp)
        return
      }
      fs.renameSync(temp, path)
      await syncDirectoryAsync(path)
    } catch (error) {
      handle.close()
      throw error
    }
    if (this.wanted()) this.made = { path, handle }
    else drop({ path, handle })
  }

  private wanted(): boolean {
    return !this.closed && !this.superseded
  }
}

function drop(made: MadeIndexFile): void {
  made.handle.close()
  removeQuietly(made.path)
}

/**
 * True for an index file that a crash cut short while it was made: shorter than an index file of
 * `fileSize` bytes, with a header of zeros (a file is whole before its header is first written).
 * Load removes such a last file; any other short file is damage, and load reports it.
 */
export function isCutCreation(path: string, fileSize: number): boolean {
  let fd = -1
  try {
    if (fs.statSync(path).size >= fileSize) return false
    fd = fs.openSync(path, 'r')
    const head = Buffer.alloc(INDEX_HEADER_SIZE)
    const n = fs.readSync(fd, head, 0, head.length, 0)
    return head.subarray(0, n).every((byte) => byte === 0)
  } catch {
    return false
  } finally {
    if (fd >= 0) fs.closeSync(fd)
  }
}
