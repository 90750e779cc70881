// File access for verify: plain positioned reads in bounded chunks, never a mapping, never a write,
// and tolerant of a live store under it (a file may grow, appear or disappear while it is read).
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { join } from 'node:path'

import { isTempSegmentName, parseOffsetName, segmentLayoutIssues } from '../../store/mapped/segment-name.js'
import type { Problems } from './report.js'

const SCAN_CHUNK = 1024 * 1024
const ZEROS = Buffer.alloc(SCAN_CHUNK)

/** Reads up to `length` bytes at `position`; fewer only at the end of the file. */
export function readFully(fd: number, buf: Buffer, offset: number, length: number, position: number): number {
  let done = 0
  while (done < length) {
    const n = fs.readSync(fd, buf, offset + done, length - done, position + done)
    if (n <= 0) break
    done += n
  }
  return done
}

export function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code
}

export function listDir(path: string): string[] | null {
  try {
    return fs.readdirSync(path)
  } catch (error) {
    if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') return null
    throw error
  }
}

export function isDirectory(path: string): boolean {
  try {
    return fs.statSync(path).isDirectory()
  } catch {
    return false
  }
}

export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** A segment file (commit log or consume queue): named by its start offset. */
export interface Segment {
  /** Path relative to the store directory. */
  rel: string
  path: string
  start: number
  /** Actual length on disk. */
  size: number
}

/**
 * The segment files of one directory, sorted by start offset. Names that are not 20-digit offsets
 * are problems (the store refuses to load them), except the `.tmp` leftovers it ignores.
 */
export function listSegments(dir: string, relDir: string, problems: Problems, notes: string[]): Segment[] {
  const names = listDir(dir) ?? []
  const out: Segment[] = []
  for (const name of names.sort()) {
    const rel = `${relDir}/${name}`
    if (isTempSegmentName(name)) {
      notes.push(`${rel}: a temporary file (a file being created, or left by an interrupted creation), ignored`)
      continue
    }
    const start = parseOffsetName(name)
    let stat: fs.Stats
    try {
      stat = fs.statSync(join(dir, name))
    } catch (error) {
      if (errorCode(error) === 'ENOENT') continue // deleted since the listing
      throw error
    }
    if (start === null || !stat.isFile()) {
      problems.add({ file: rel, offset: 0, reason: `not a segment file (a 20-digit start offset): the store would refuse to load` })
      continue
    }
    out.push({ rel, path: join(dir, name), start, size: stat.size })
  }
  return out.sort((a, b) => a.start - b.start)
}

/**
 * The file size of a segment queue, from the files themselves: the distance between the first two
 * names when a file has that size, else the most common size (ties: the largest).
 */
export function inferFileSize(files: readonly Segment[]): number {
  if (files.length === 0) return 0
  if (files.length >= 2) {
    const gap = files[1].start - files[0].start
    if (gap > 0 && files.some((f) => f.size === gap)) return gap
  }
  return mostCommon(files.map((f) => f.size))
}

export function mostCommon(sizes: readonly number[]): number {
  const counts = new Map<number, number>()
  for (const s of sizes) counts.set(s, (counts.get(s) ?? 0) + 1)
  let best = 0
  let bestCount = 0
  for (const [size, count] of counts) {
    if (count > bestCount || (count === bestCount && size > best)) {
      best = size
      bestCount = count
    }
  }
  return best
}

/**
 * Checks a queue's files against the file size and the store's layout rule (segmentLayoutIssues):
 * returns the indexes of files that do not follow the one before them.
 */
export function checkSegmentLayout(files: readonly Segment[], fileSize: number, problems: Problems, what: string): Set<number> {
  const gapsBefore = new Set<number>()
  if (fileSize <= 0) return gapsBefore
  const issues = segmentLayoutIssues(
    files.map((f) => f.start),
    fileSize,
  )
  let next = 0
  for (let i = 0; i < files.length; i++) {
    const f = files[i]
    if (f.size !== fileSize) {
      problems.add({ file: f.rel, offset: f.size, reason: `wrong size: ${f.size} bytes, the ${what} files are ${fileSize}` })
    }
    for (; next < issues.length && issues[next].index === i; next++) {
      const issue = issues[next]
      if (issue.kind === 'misaligned') {
        problems.add({ file: f.rel, offset: 0, reason: `starts at ${f.start}, not a multiple of the file size ${fileSize}` })
        continue
      }
      gapsBefore.add(i)
      const why =
        issue.kind === 'gap'
          ? `a gap: the files for ${issue.expected}..${f.start - 1} are missing`
          : `overlaps the previous file, which ends at ${issue.expected}`
      problems.add({ file: f.rel, offset: 0, reason: `not contiguous with ${files[i - 1].rel}: ${why}` })
    }
  }
  return gapsBefore
}

/**
 * The first non-zero byte from (files[index], pos) on, through the later files; null when only
 * zeros follow. A file that disappeared counts as zeros. `firstBytes` / `laterBytes` bound how
 * much of the first file (from pos) and of each later file (from its start) is looked at.
 */
export function firstNonZero(
  files: readonly Segment[],
  index: number,
  pos: number,
  scratch: Buffer,
  firstBytes = Infinity,
  laterBytes = Infinity,
): { index: number; pos: number } | null {
  for (let i = index; i < files.length; i++) {
    const f = files[i]
    const from = i === index ? pos : 0
    const to = Math.min(f.size, from + (i === index ? firstBytes : laterBytes))
    let fd: number
    try {
      fd = fs.openSync(f.path, 'r')
    } catch (error) {
      if (errorCode(error) === 'ENOENT') continue
      throw error
    }
    try {
      for (let at = from; at < to; ) {
        const n = readFully(fd, scratch, 0, Math.min(scratch.length, to - at), at)
        if (n <= 0) break
        if (scratch.compare(ZEROS, 0, n, 0, n) !== 0) {
          for (let k = 0; k < n; k++) if (scratch[k] !== 0) return { index: i, pos: at + k }
        }
        at += n
      }
    } finally {
      fs.closeSync(fd)
    }
  }
  return null
}

/** A window of one file, read in chunks, for sequential or nearby reads. */
export class FileWindow {
  buf: Buffer
  private fd = -1
  private path = ''
  private size = 0
  private start = 0
  private len = 0

  constructor(private readonly chunk: number) {
    this.buf = Buffer.allocUnsafe(chunk)
  }

  /** Switches to a file (keeps it open until the next switch or close). */
  use(path: string, size: number): void {
    if (path === this.path && this.fd >= 0) {
      this.size = size
      return
    }
    this.close()
    this.fd = fs.openSync(path, 'r')
    this.path = path
    this.size = size
  }

  close(): void {
    if (this.fd >= 0) fs.closeSync(this.fd)
    this.fd = -1
    this.path = ''
    this.start = 0
    this.len = 0
  }

  invalidate(): void {
    this.len = 0
  }

  /**
   * Makes [pos, pos + need) readable, clipped to the file end, and returns the index of `pos` in
   * `buf`; `available(pos)` tells how many bytes from there are loaded.
   */
  load(pos: number, need: number): number {
    const want = Math.max(0, Math.min(need, this.size - pos))
    if (pos >= this.start && pos + want <= this.start + this.len) return pos - this.start
    const length = Math.max(0, Math.min(Math.max(want, this.chunk), this.size - pos))
    if (length > this.buf.length) this.buf = Buffer.allocUnsafe(length)
    this.start = pos
    this.len = length === 0 ? 0 : readFully(this.fd, this.buf, 0, length, pos)
    return 0
  }

  available(pos: number): number {
    return Math.max(0, this.start + this.len - pos)
  }
}

/** A scratch buffer for firstNonZero. */
export function scanScratch(): Buffer {
  return Buffer.allocUnsafe(SCAN_CHUNK)
}
