// The segment files of one folder of a store another process writes (the commit log, or one
// consume queue), as a read-only opener sees them: listed again when the folder changes, each read
// with positioned reads through a descriptor opened 'r' (at most MAX_OPEN_SEGMENTS kept open).
//
// Why positioned reads and not a mapping: the writer creates files at full size with holes and
// reserves blocks ahead of itself, recovery may rebuild a file under the same name, and a mapping
// read of a page the file no longer backs is a SIGBUS. read(2) past a file's end returns fewer
// bytes instead, so no sequence of writer actions can crash a reader. A descriptor kept open on a
// file the writer deleted still reads its (unlinked) inode until the next listing drops it.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { join } from 'node:path'

import { parseOffsetName } from '../mapped/segment-name.js'

export interface ReadOnlySegment {
  /** Start offset (the file's name; for index files, the time it names). */
  readonly offset: number
  readonly path: string
  readonly ino: number
  /**
   * The file's identity: inode and birth time. An inode number alone is reused as soon as a
   * deleted file's last descriptor closes, so a file written anew under the old name may get it.
   */
  readonly id: string
  /** The file's size when listed (a file being created may still grow to its full size). */
  size: number
  /** The descriptor, opened on first read; -1 before, or once the file could not be opened. */
  fd: number
}

/** What a listing changed. */
export interface ListingChange {
  /** Some file changed at all (added, removed, replaced). */
  changed: boolean
  /** A file other than the first ones was removed, or one was replaced by a new inode. */
  replaced: boolean
}

const UNCHANGED: ListingChange = { changed: false, replaced: false }

/**
 * How old a listing may be when a read or the follower goes on with it: a folder's stat costs a
 * few microseconds, as much as reading a queue's units, and files only come and go at rolls,
 * retention and the writer's recovery. New records are seen without a listing (they land in
 * files already listed; a read that runs past the listed files lists them again at once).
 */
export const LISTING_MAX_AGE_MS = 100

export class ReadOnlySegments {
  /** By start offset. */
  segments: ReadOnlySegment[] = []
  /** The folder's inode and times when last listed ('' before the first listing). */
  private stamp = ''

  /** `order` gives a file's place from its name (null: not a segment); by default the offset it names. */
  constructor(
    readonly dir: string,
    private readonly order: (name: string) => number | null = parseOffsetName,
  ) {}

  /** Lists the folder again if it changed since the last listing (one stat when it did not). */
  refresh(): ListingChange {
    const stamp = folderStamp(this.dir)
    if (stamp === this.stamp) return UNCHANGED
    this.stamp = stamp
    const previous = new Map(this.segments.map((segment) => [segment.path, segment]))
    const next: ReadOnlySegment[] = []
    let replaced = false
    for (const name of listNames(this.dir)) {
      const offset = this.order(name)
      if (offset === null) continue
      const path = join(this.dir, name)
      let st: fs.BigIntStats
      try {
        st = fs.statSync(path, { bigint: true })
      } catch {
        continue
      }
      if (!st.isFile()) continue
      const id = `${st.ino}:${st.birthtimeNs}`
      const known = previous.get(path)
      if (known !== undefined && known.id === id) {
        previous.delete(path)
        next.push(known)
        continue
      }
      if (known !== undefined) replaced = true
      next.push({ offset, path, ino: Number(st.ino), id, size: Number(st.size), fd: -1 })
    }
    next.sort((a, b) => a.offset - b.offset)
    const first = next[0]?.offset ?? Number.POSITIVE_INFINITY
    for (const gone of previous.values()) {
      // Retention removes the oldest files; anything else gone means the writer rebuilt the folder.
      if (gone.offset >= first) replaced = true
      closeSegment(gone)
    }
    this.segments = next
    return { changed: true, replaced }
  }

  /** Forgets the last listing: the next refresh lists again (a file vanished under a read). */
  invalidate(): void {
    this.stamp = ''
  }

  /** The segment holding `offset`: the last one starting at or before it (null before the first). */
  segmentOf(offset: number): ReadOnlySegment | null {
    const segments = this.segments
    let lo = 0
    let hi = segments.length - 1
    let found: ReadOnlySegment | null = null
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      if (segments[mid].offset <= offset) {
        found = segments[mid]
        lo = mid + 1
      } else {
        hi = mid - 1
      }
    }
    return found
  }

  /** Bytes [pos, pos + length) of a segment; fewer at its end, none when it cannot be read. */
  read(segment: ReadOnlySegment, pos: number, length: number, into?: Buffer): Buffer {
    const target = into !== undefined && into.length >= length ? into.subarray(0, length) : Buffer.allocUnsafe(length)
    const fd = this.descriptor(segment)
    if (fd < 0) return target.subarray(0, 0)
    let done = 0
    while (done < length) {
      const n = fs.readSync(fd, target, done, length - done, pos + done)
      if (n <= 0) break
      done += n
    }
    return target.subarray(0, done)
  }

  /** The segment's descriptor, opened now if it is not open; -1 when the file cannot be opened. */
  descriptor(segment: ReadOnlySegment): number {
    if (segment.fd < 0) {
      try {
        segment.fd = fs.openSync(segment.path, 'r')
      } catch {
        this.invalidate()
        return -1
      }
      openSegments.add(segment)
      if (openSegments.size > MAX_OPEN_SEGMENTS) closeSegment(openSegments.values().next().value as ReadOnlySegment)
    } else {
      openSegments.delete(segment)
      openSegments.add(segment)
    }
    return segment.fd
  }

  /** Closes every descriptor; the listing is kept, and a later read opens them again. */
  close(): void {
    for (const segment of this.segments) closeSegment(segment)
    this.segments = []
    this.stamp = ''
  }
}

/**
 * Descriptors readers keep open, least recently read first, process-wide: a reader that walks a
 * long queue must not run the process out of descriptors. A closed one is opened again when read;
 * only a file deleted in between is then gone, as it is for the writer.
 */
const MAX_OPEN_SEGMENTS = 128
const openSegments = new Set<ReadOnlySegment>()

function closeSegment(segment: ReadOnlySegment): void {
  openSegments.delete(segment)
  if (segment.fd < 0) return
  try {
    fs.closeSync(segment.fd)
  } catch {
    // already closed
  }
  segment.fd = -1
}

/**
 * The kernel stamps a folder's times from a coarse clock (a few milliseconds a step), so an entry
 * added in the same step as a listing leaves the times as that listing saw them: a folder changed
 * this recently is listed again at every refresh until its times are older than this.
 */
const RACY_STAMP_MS = 50n
let racyStamps = 0

/** The folder's identity and change times: a new or removed entry moves its mtime. */
function folderStamp(dir: string): string {
  // No exception for a missing folder: the follower asks several times a tick, and a thrown
  // error costs more than the stat.
  const st = fs.statSync(dir, { bigint: true, throwIfNoEntry: false })
  if (st === undefined) return 'missing'
  const nowMs = BigInt(Date.now())
  if (nowMs - st.mtimeNs / 1_000_000n < RACY_STAMP_MS || nowMs - st.ctimeNs / 1_000_000n < RACY_STAMP_MS) return `racy:${racyStamps++}`
  return `${st.ino}:${st.mtimeNs}:${st.ctimeNs}`
}

export function listNames(dir: string): string[] {
  try {
    return fs.readdirSync(dir).sort()
  } catch {
    return []
  }
}
