// File descriptors of segment files. A mapping does not need its descriptor once mmap returns, so
// segment files do not keep one: a descriptor is opened when a system call needs it (creating or
// mapping a file, reserving blocks, fdatasync, positional writes) and kept in a small LRU cache for
// the next call on the same file. The cache is process-wide, like the limit it respects
// (RLIMIT_NOFILE): a store with tens of thousands of files holds at most `capacity` of them open.
//
// Running out anyway (EMFILE / ENFILE: the rest of the process holds the table) first closes the
// cache's idle descriptors and retries once; if that is not enough the caller gets an MQStoreError
// with code TOO_MANY_OPEN_FILES, and the next call simply tries again, so the store carries on by
// itself once descriptors are free.
import * as fs from 'node:fs'

import { ioError, MQStoreError } from '../../errors.js'

/** Descriptors the cache keeps open between calls, at most. */
export const DESCRIPTOR_CACHE_CAPACITY = 32

/** The errno codes of a full descriptor table (the process's, or the system's). */
const OUT_OF_DESCRIPTORS = new Set(['EMFILE', 'ENFILE'])

export function isOutOfDescriptors(error: unknown): boolean {
  let cause: unknown = error
  for (let depth = 0; depth < 4 && cause !== undefined && cause !== null; depth++) {
    const code = (cause as { code?: unknown }).code
    if (typeof code === 'string' && OUT_OF_DESCRIPTORS.has(code)) return true
    if (code === 'TOO_MANY_OPEN_FILES') return true
    cause = (cause as { cause?: unknown }).cause
  }
  return false
}

interface Entry {
  fd: number
  writable: boolean
  /** Calls using the descriptor right now (an async fdatasync); a pinned entry is never closed. */
  pins: number
  /** Set when the entry was dropped while pinned: the last unpin closes it. */
  dropped: boolean
}

export class DescriptorCache {
  /** Insertion order is recency: the first entry is the least recently used. */
  private readonly entries = new Map<string, Entry>()
  private capacity: number
  /** Descriptors opened, in all (a figure for stats and tests). */
  opened = 0

  constructor(capacity = DESCRIPTOR_CACHE_CAPACITY) {
    this.capacity = checkCapacity(capacity)
  }

  get size(): number {
    return this.entries.size
  }

  setCapacity(capacity: number): void {
    this.capacity = checkCapacity(capacity)
    this.trim(this.capacity)
  }

  /**
   * Runs `fn` with a descriptor of `path` (opened 'r+' when writable, else 'r') and keeps the
   * descriptor for the next call. `fn` must not keep it: it may be closed after `fn` returns.
   */
  use<T>(path: string, writable: boolean, fn: (fd: number) => T): T {
    const entry = this.acquire(path, writable)
    try {
      return fn(entry.fd)
    } finally {
      this.unpin(path, entry)
    }
  }

  /** The same for asynchronous work: the descriptor stays open until the promise settles. */
  async useAsync<T>(path: string, writable: boolean, fn: (fd: number) => Promise<T>): Promise<T> {
    const entry = this.acquire(path, writable)
    try {
      return await fn(entry.fd)
    } finally {
      this.unpin(path, entry)
    }
  }

  /** Closes the cached descriptor of `path` (its file is unmapped, renamed or deleted). */
  forget(path: string): void {
    const entry = this.entries.get(path)
    if (entry === undefined) return
    this.entries.delete(path)
    if (entry.pins > 0) entry.dropped = true
    else closeQuietly(entry.fd)
  }

  /** Closes every idle descriptor whose path starts with `prefix` (a store that closes). */
  forgetUnder(prefix: string): void {
    for (const path of [...this.entries.keys()]) if (path.startsWith(prefix)) this.forget(path)
  }

  private acquire(path: string, writable: boolean): Entry {
    let entry = this.entries.get(path)
    if (entry !== undefined && (entry.writable || !writable)) {
      // Move to the recent end.
      this.entries.delete(path)
      this.entries.set(path, entry)
    } else {
      if (entry !== undefined) this.forget(path)
      this.trim(this.capacity - 1)
      entry = { fd: openDescriptor(path, writable ? 'r+' : 'r', this), writable, pins: 0, dropped: false }
      this.opened++
      this.entries.set(path, entry)
    }
    entry.pins++
    return entry
  }

  private unpin(path: string, entry: Entry): void {
    entry.pins--
    if (entry.pins > 0) return
    if (entry.dropped) closeQuietly(entry.fd)
    else if (this.entries.size > this.capacity) this.forget(path)
  }

  /** Closes idle descriptors, least recently used first, until at most `keep` remain. */
  trim(keep: number): number {
    let closed = 0
    for (const [path, entry] of this.entries) {
      if (this.entries.size <= Math.max(0, keep)) break
      if (entry.pins > 0) continue
      this.forget(path)
      closed++
    }
    return closed
  }
}

/** The cache every segment file uses. */
export const descriptors = new DescriptorCache()

/**
 * fs.openSync that survives a full descriptor table once: it closes the cache's idle descriptors
 * and retries. Still out of descriptors, it throws TOO_MANY_OPEN_FILES; any other failure is an
 * IO_ERROR (or NO_SPACE) naming the file.
 */
export function openDescriptor(path: string, flags: string, cache: DescriptorCache = descriptors, mode?: number): number {
  try {
    return fs.openSync(path, flags, mode)
  } catch (first) {
    if (!isOutOfDescriptors(first)) throw ioError(`cannot open ${path}`, first)
    let cause = first
    if (cache.trim(0) > 0) {
      try {
        return fs.openSync(path, flags, mode)
      } catch (again) {
        if (!isOutOfDescriptors(again)) throw ioError(`cannot open ${path}`, again)
        cause = again
      }
    }
    throw new MQStoreError('TOO_MANY_OPEN_FILES', `cannot open ${path}: the process is out of file descriptors`, { cause })
  }
}

function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd)
  } catch {
    // EBADF cannot happen for a descriptor we own; EIO on close reports nothing we could act on
    // (the data is synced explicitly or not at all).
  }
}

function checkCapacity(capacity: number): number {
  if (!Number.isSafeInteger(capacity) || capacity < 1) {
    throw new RangeError(`descriptor cache capacity must be a positive integer, got ${capacity}`)
  }
  return capacity
}
