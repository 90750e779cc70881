// System calls on a segment file through a descriptor, kept apart from MappedFile's bookkeeping.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'

import { ioError, MQStoreError } from '../../errors.js'
import { type Advice, native, type MapHandle } from '../../native.js'
import { descriptors, openDescriptor } from './descriptors.js'
import { syncDirectory } from './directory.js'

/**
 * Reserves the blocks of an existing file that has holes, keeping its modification time: retention
 * reads a file's age from it, and fallocate counts as a modification. A file whose blocks already
 * cover its size (the usual case) costs one fstat.
 */
export function reserveBlocks(fd: number, fileName: string, fileSize: number): void {
  try {
    const stat = fs.fstatSync(fd)
    if (stat.blocks * 512 >= fileSize) return
    native.allocate(fd, 0, fileSize)
    fs.futimesSync(fd, stat.atime, stat.mtime)
  } catch (cause) {
    throw ioError(`cannot reserve the blocks of ${fileName} (${fileSize} bytes)`, cause)
  }
}

/** Bytes [pos, pos + length) of a segment by a positioned read (fewer at its end), without mapping it. */
export function readSegmentBytes(fileName: string, pos: number, length: number): Buffer {
  const bytes = Buffer.alloc(length)
  let got = 0
  try {
    got = descriptors.use(fileName, false, (fd) => fs.readSync(fd, bytes, 0, length, pos))
  } catch (cause) {
    throw ioError(`cannot read ${fileName}`, cause)
  }
  return got === length ? bytes : bytes.subarray(0, got)
}

/** mmap of a whole segment, failures named after the file. */
export function mapSegment(fd: number, fileName: string, fileSize: number, writable: boolean, expose = fileSize): MapHandle {
  try {
    return native.map(fd, fileSize, writable, expose)
  } catch (cause) {
    throw ioError(`cannot map ${fileName}`, cause)
  }
}

/**
 * Random-access advice over a mapping (MappedFileOptions.readAround false): a page fault then reads
 * the page it touches, not the pages around it. A hint; one the system refuses changes nothing.
 */
export function limitReadAround(handle: MapHandle, length: number): void {
  try {
    handle.advise(0, length, 'random')
  } catch {
    // See above.
  }
}

/** A segment must be exactly its queue's file size. */
export function checkLength(fileName: string, length: number, fileSize: number): void {
  if (length !== fileSize) {
    throw new MQStoreError('BAD_FILE_SIZE', `${fileName} is ${length} bytes, but segments of this queue are ${fileSize} bytes`)
  }
}

/**
 * Asks the kernel to start writing back bytes [from, to) of the file (sync_file_range on the libuv
 * pool; nothing elsewhere than Linux). A hint that makes nothing durable: one that cannot start
 * changes nothing, and the next sync reports real errors.
 */
export function startWriteBack(fileName: string, from: number, to: number): void {
  try {
    descriptors.use(fileName, false, (fd) => native.writeBack(fd, from, to - from))
  } catch {
    // A hint only (see above).
  }
}

/**
 * Drops the page-table entries of [from, to) of a shared file mapping (madvise DONTNEED, Linux):
 * the bytes stay in the page cache, dirty ones still dirty, and an access maps them again. Done
 * before the write-back of pages the writer has left: cleaning a page that is still mapped
 * write-protects it with a TLB shootdown per page, each of which stops the writer's CPU (in a
 * virtual machine, for many microseconds). Best effort: mlocked pages refuse it.
 *
 * With `writeBackOf` (the file's name), the drop and then the range's write-back run on the libuv
 * pool as one piece of work: a drop costs the calling thread a few hundred microseconds (the
 * unmap and its TLB flush), which the writer should not wait for. Without it, the drop runs here
 * and is done on return (close drops, then syncs).
 */
export function dropPages(handle: MapHandle | null, from: number, to: number, writeBackOf: string | null = null): void {
  if (to <= from) return
  if (handle === null || process.platform !== 'linux') {
    if (writeBackOf !== null) startWriteBack(writeBackOf, from, to)
    return
  }
  try {
    if (writeBackOf === null) handle.advise(from, to - from, 'dontneed')
    else descriptors.use(writeBackOf, false, (fd) => handle.dropAsync(from, to - from, fd)).catch(() => undefined)
  } catch {
    // A hint only: the next sync writes the pages either way.
  }
}

/** madvise of [from, to) of `handle` (null: not mapped); a hint: false when not given (refused, or not mapped). */
export function adviseRange(handle: MapHandle | null, from: number, to: number, advice: Advice): boolean {
  if (handle === null) return false
  try {
    handle.advise(from, to - from, advice)
    return true
  } catch {
    return false
  }
}

/**
 * `advice` for [from, to) now; then on the libuv pool: the range written back (waited for),
 * unmapped and dropped from the page cache (clean pages only: one written meanwhile stays), and
 * faulted in again, as pages of that advice (Linux; elsewhere only the fault-in).
 */
export function evictPages(handle: MapHandle, fileName: string, from: number, to: number, advice: Advice): Promise<void> {
  adviseRange(handle, from, to, advice)
  const evicted =
    process.platform === 'linux' ? descriptors.use(fileName, false, (fd) => handle.evictAsync(from, to - from, fd)) : Promise.resolve()
  return evicted.then(() => handle.warmAsync(from, to - from))
}

/** Bytes to write at the start of a file once a sync has succeeded (MappedFile.flushAsync). */
export interface WriteAfterSync {
  fd: number
  bytes: Uint8Array
}

/** Writes `after`; best effort (a failure loses only the hint the bytes carry). */
export function writeAfter(after: WriteAfterSync): void {
  try {
    fs.writeSync(after.fd, after.bytes, 0, after.bytes.length, 0)
  } catch {
    // See above.
  }
}

/**
 * msync of [from, to) on the libuv pool, then `after` written: on Linux in the same piece of pool
 * work, so that a burst of puts that never yields to the event loop still gets the write; elsewhere
 * once the sync has settled. macOS's msync stops short of the drive: `fullSync` goes the rest.
 */
export async function syncMappedRange(
  handle: MapHandle,
  from: number,
  to: number,
  after: WriteAfterSync | null,
  fullSync: () => Promise<void>,
): Promise<void> {
  if (after !== null && native.platform === 'linux') {
    await handle.syncAsync(from, to - from, after.fd, after.bytes, 0).catch((error: unknown) => {
      // Only the sync's own failure counts (the write after it is a hint).
      if ((error as { syscall?: string }).syscall !== 'pwrite') throw error
    })
    return
  }
  await handle.syncAsync(from, to - from)
  if (native.platform === 'darwin') await fullSync()
  if (after !== null) writeAfter(after)
}

export function fsyncAsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fsync(fd, (err) => (err ? reject(err) : resolve())))
}

export function fdatasync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fdatasync(fd, (err) => (err ? reject(err) : resolve())))
}

/**
 * Creates a segment at full size with its first `reserveBytes` of blocks reserved and returns its
 * descriptor (the caller closes it). Durable: written as `<name>.tmp`, synced and renamed, so a crash never leaves a short
 * segment under the name (the caller syncs the directory). Cheap: created under its own name with
 * no sync (there is none to order a rename after); its first flush makes it durable.
 */
export function createSegment(fileName: string, fileSize: number, reserveBytes: number, cheap: boolean): number {
  const temp = cheap ? fileName : `${fileName}.tmp`
  let fd = -1
  try {
    fd = openDescriptor(temp, 'w+', descriptors, 0o644)
    // Past the first chunk the file is a hole until the writer reserves it.
    if (reserveBytes < fileSize) fs.ftruncateSync(fd, fileSize)
    native.allocate(fd, 0, reserveBytes)
    if (!cheap) {
      fs.fsyncSync(fd)
      fs.renameSync(temp, fileName)
    }
    return fd
  } catch (cause) {
    if (fd >= 0) fs.closeSync(fd)
    fs.rmSync(temp, { force: true })
    if (cause instanceof MQStoreError) throw cause
    throw ioError(`cannot create ${fileName} (${fileSize} bytes)`, cause)
  }
}

/** createSegment, then the new file's entry synced (unless `cheap`) and the file mapped; nothing is left if that fails. */
export function createMappedSegment(fileName: string, fileSize: number, reserveBytes: number, cheap: boolean): MapHandle {
  const fd = createSegment(fileName, fileSize, reserveBytes, cheap)
  try {
    if (!cheap) syncDirectory(fileName)
    return mapSegment(fd, fileName, fileSize, true)
  } catch (error) {
    fs.rmSync(fileName, { force: true })
    throw error
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * createSegment for a file created without syncs, made and mapped on the libuv pool in one piece of
 * work (create, resize, the reservation of its first `reserveBytes`, the mapping and the fault of
 * its first `warmBytes`, and without `readAround` its random-access advice (see limitReadAround):
 * system calls that each may wait for the file system's journal, the disk or the address space's
 * lock). It never replaces a file: an existing one is an error. Whatever fails, nothing is left.
 */
export async function createMappedSegmentAsync(
  fileName: string,
  fileSize: number,
  reserveBytes: number,
  warmBytes: number,
  exposeBytes = fileSize,
  readAround = true,
): Promise<MapHandle> {
  try {
    return await native.createMapped(
      fileName,
      fileSize,
      Math.min(reserveBytes, fileSize),
      warmBytes,
      exposeBytes,
      readAround ? 'normal' : 'random',
    )
  } catch (cause) {
    throw ioError(`cannot create ${fileName} (${fileSize} bytes)`, cause)
  }
}

/**
 * Reads [from, from + target.length) of a file into `target` through a descriptor (zeros past its
 * end), for scans of a segment's unwritten rest: reading a hole through a mapping of a tmpfs file
 * allocates a page (a SIGBUS once it is full); read(2) returns zeros.
 */
export function readThroughDescriptor(fileName: string, from: number, target: Buffer): void {
  let done = 0
  try {
    descriptors.use(fileName, false, (fd) => {
      while (done < target.length) {
        const n = fs.readSync(fd, target, done, target.length - done, from + done)
        if (n === 0) break
        done += n
      }
    })
  } catch (cause) {
    throw ioError(`cannot read ${fileName}`, cause)
  }
  target.fill(0, done)
}
