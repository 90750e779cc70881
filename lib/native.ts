// The typed face of the native addon. This module is the addon's only caller: everything else in
// mqstore goes through these declarations, and arguments are validated here or above before they
// cross into C++ (the addon re-checks bounds cheaply).
import { createRequire } from 'node:module'

import { packageRoot } from './package-root.js'

/** madvise advice; 'hugepage' / 'nohugepage' do nothing where the system has no transparent huge pages. */
export type Advice = 'normal' | 'random' | 'sequential' | 'willneed' | 'dontneed' | 'hugepage' | 'nohugepage'

/** One mmap of a file, created by `map()`. */
export interface MapHandle {
  /**
   * The widest ArrayBuffer over the mapped bytes so far: [0, length) unless the handle was made
   * with less exposed (createMapped's `expose`); empty (byteLength 0) once closed.
   */
  readonly buffer: ArrayBuffer
  readonly length: number
  readonly closed: boolean
  readonly writable: boolean
  /** msync(MS_SYNC) of the pages covering [offset, offset + length), on the calling thread. */
  sync(offset: number, length: number): void
  /**
   * The same on the libuv pool; the mapping stays valid until it settles. With `fd` (duplicated
   * here), `bytes` (copied here) are written at `position` of that file once the msync has
   * succeeded, in the same piece of pool work; a failed write rejects with syscall 'pwrite'.
   */
  syncAsync(offset: number, length: number, fd?: number, bytes?: Uint8Array, position?: number): Promise<void>
  /**
   * Faults the pages in on the libuv pool (MADV_POPULATE_WRITE where the kernel has it); rejects
   * with EFAULT / EHWPOISON for pages that cannot be faulted in (never touches them).
   */
  warmAsync(offset: number, length: number): Promise<void>
  /**
   * On the libuv pool: madvise(MADV_DONTNEED) of the pages, then with `fd` (duplicated here, so the
   * caller may close its own) the start of their write-back (sync_file_range, Linux). A hint: it
   * never rejects for the system calls; it does nothing elsewhere than Linux.
   */
  dropAsync(offset: number, length: number, fd?: number): Promise<void>
  /**
   * On the libuv pool, with `fd` (duplicated here): the pages' write-back, waited for
   * (sync_file_range), then madvise(MADV_DONTNEED) and posix_fadvise(POSIX_FADV_DONTNEED), so the
   * page cache drops the ones that are clean and unmapped (Linux). A hint like dropAsync; makes
   * nothing durable.
   */
  evictAsync(offset: number, length: number, fd: number): Promise<void>
  advise(offset: number, length: number, advice: Advice): void
  /** mlock / munlock; throw on failure (callers treat locking as best effort). */
  lock(offset: number, length: number): void
  unlock(offset: number, length: number): void
  /**
   * The buffer over at least [0, length) (rounded up to a page): `buffer` when it is that wide,
   * else a wider one that becomes `buffer`. Earlier buffers stay valid until close. V8 counts
   * each buffer's length towards the memory it collects for, so a writer of a small prefix of a
   * big file exposes only what it uses.
   */
  expose(length: number): ArrayBuffer
  /**
   * Idempotent: detaches every buffer it gave out (every view becomes empty), cancels warm-ups
   * the pool has not started (they reject with ERR_MAPPING_CLOSED), then unmaps once no work is
   * in flight (a requested sync still runs).
   */
  close(): void
}

export interface NativeBinding {
  /**
   * mmap of [0, length) of fd: MAP_SHARED when writable, a private copy-on-write map otherwise.
   * The handle's `buffer` covers [0, expose) rounded up to a page (default: all; see expose()).
   */
  map(fd: number, length: number, writable: boolean, expose?: number): MapHandle
  /** Reserves disk blocks for [offset, offset + length): posix_fallocate / F_PREALLOCATE. */
  allocate(fd: number, offset: number, length: number): void
  /**
   * On the libuv pool: creates the file `path` (which must not exist) of `size` bytes, reserves the
   * blocks of [0, reserve), maps it (as `map` does, writable) and faults [0, min(warm, reserve)) in;
   * the directory entry is not synced. The handle's `buffer` covers [0, expose) rounded up to a
   * page (default: the whole file; see MapHandle.expose). `advice` 'random' leaves the mapping
   * advised random-access (as MapHandle.advise does, but on the pool). Rejects with the failing
   * call's errno, the file removed.
   */
  createMapped(path: string, size: number, reserve: number, warm: number, expose?: number, advice?: 'normal' | 'random'): Promise<MapHandle>
  /**
   * Starts write-back of the dirty pages of [offset, offset + length) on the libuv pool (with its
   * own duplicate of `fd`) and returns at once (sync_file_range SYNC_FILE_RANGE_WRITE): not
   * durable, but a later sync finds them written. True where the system does it (Linux), false
   * where it does nothing.
   */
  writeBack(fd: number, offset: number, length: number): boolean
  /**
   * The same on the calling thread, for a few pages (a group commit's): their I/O starts now, and a
   * sync that follows on the pool finds it under way. False where the system has no such call
   * (macOS) or it failed (a hint: the sync reports real errors).
   */
  writeBackNow(fd: number, offset: number, length: number): boolean
  /**
   * Exclusive non-blocking flock plus an fcntl write lock on the whole file (what a RocketMQ
   * broker's FileChannel.tryLock takes; an open-file-description lock on Linux). Throws EAGAIN /
   * EWOULDBLOCK / EACCES when either is held elsewhere, and then holds neither.
   */
  lockFile(fd: number): void
  /** Drops both locks. */
  unlockFile(fd: number): void
  /** The `code` the addon's errors carry for an errno (libuv's spelling; "UNKNOWN" if none). */
  errnoName(errno: number): string
  /**
   * For k < count: out[k] = crc32(bytes[ranges[2k] .. ranges[2k] + ranges[2k+1])) & 0x7fffffff
   * (RocketMQ's BODYCRC), in one call. Throws a RangeError, writing nothing, when a range is
   * outside `bytes` or the arrays are shorter than `count`.
   */
  crc32Ranges(bytes: Uint8Array, ranges: Int32Array, count: number, out: Int32Array): void
  /**
   * Four table entries per k < count: [start, length, innerStart, innerLength], the inner range
   * within [start, start + length). The bytes around each inner range (before it, then after it)
   * go end to end into `outer` from outerAt; the inner bytes end to end into `inner` from innerAt,
   * with crcOut[k] (when given) their BODYCRC (crc32 & 0x7fffffff) from the same pass: a read's
   * records without their bodies, and the bodies, one row each. With `inner` null only the outer
   * bytes are copied (crcOut must then be null): a zero-copy read serves bodies in place. Throws, writing nothing, a
   * TypeError for a wrong argument type and a RangeError when count runs past an array, a range
   * lies outside src or its inner range outside it, a position is not a non-negative integer, the
   * bytes do not fit a destination, or a destination overlaps src.
   */
  splitCopyCrc(
    src: Uint8Array,
    table: Float64Array,
    count: number,
    outer: Uint8Array,
    outerAt: number,
    inner: Uint8Array | null,
    innerAt: number,
    crcOut: Int32Array | null,
  ): void
  /**
   * Asks the CPU to load the cache lines of src[ranges[2k] .. ranges[2k] + ranges[2k+1]) for
   * k < count, all at once: reads of records scattered over a file then wait for their misses
   * together. A hint; ranges outside src are skipped. TypeError / RangeError on bad arguments.
   */
  prefetchRanges(src: Uint8Array, ranges: Float64Array, count: number): void
  /** out[k] = BODYCRC of bodies[k] when it is a Uint8Array, else -1; out must be long enough. */
  crc32Each(bodies: readonly unknown[], out: Int32Array): void
  /** The OS page size, read at run time (16 KiB on Apple Silicon). */
  readonly pageSize: number
  readonly platform: 'linux' | 'darwin'
}

function load(): NativeBinding {
  const require = createRequire(import.meta.url)
  const nodeGypBuild = require('node-gyp-build') as (dir: string) => unknown
  const root = packageRoot()
  try {
    return nodeGypBuild(root) as NativeBinding
  } catch (cause) {
    const triple = `${process.platform}-${process.arch}`
    throw new Error(
      `mqstore: no native build for ${triple} (Node ${process.version}). ` +
        'Install from the npm tarball, which carries prebuilds for linux-x64, linux-arm64, ' +
        'darwin-x64 and darwin-arm64, or build from source with a C++ toolchain: `npm rebuild mqstore`.',
      { cause },
    )
  }
}

const binding = load()

/**
 * The binding every module calls. It is a plain object over the addon's functions so that a test
 * can interpose on the system calls (inject an I/O error, record what was synced) through
 * `interposeNativeForTesting`; production code never replaces them.
 */
export const native: NativeBinding = {
  map: binding.map,
  allocate: binding.allocate,
  createMapped: binding.createMapped,
  writeBack: binding.writeBack,
  writeBackNow: binding.writeBackNow,
  lockFile: binding.lockFile,
  unlockFile: binding.unlockFile,
  errnoName: binding.errnoName,
  crc32Ranges: binding.crc32Ranges,
  crc32Each: binding.crc32Each,
  splitCopyCrc: binding.splitCopyCrc,
  prefetchRanges: binding.prefetchRanges,
  pageSize: binding.pageSize,
  platform: binding.platform,
}

type Interposable = Pick<NativeBinding, 'map' | 'allocate' | 'createMapped' | 'writeBack' | 'writeBackNow' | 'lockFile' | 'unlockFile'>

/**
 * Test-only seam: replaces some of the binding's functions (a wrapper may call `original`), and
 * returns a function that restores them. Not part of the public API.
 */
export function interposeNativeForTesting(wrap: (original: Readonly<Interposable>) => Partial<Interposable>): () => void {
  const original: Interposable = {
    map: native.map,
    allocate: native.allocate,
    createMapped: native.createMapped,
    writeBack: native.writeBack,
    writeBackNow: native.writeBackNow,
    lockFile: native.lockFile,
    unlockFile: native.unlockFile,
  }
  Object.assign(native, wrap(Object.freeze({ ...original })))
  return () => {
    Object.assign(native, original)
  }
}
