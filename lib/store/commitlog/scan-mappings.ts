// The commit-log files as a recovery scan reads them. The walk copies them a window at a time by
// positioned reads (readInto; see scan-window.ts for why not through a mapping). Only the rare
// reads that want a view — judging damage (torn or corrupt), a record larger than a window may
// copy — go through a mapping: a private read-only one of the file, made when first asked for. Not
// the store's writable mapping: a read through it could fault pages in for writing, marking them
// dirty (and written back again).
import { Buffer } from 'node:buffer'
import fs from 'node:fs'
import type { MapHandle } from '../../native.js'
import { native } from '../../native.js'
import { ioError } from '../../errors.js'
import { descriptors } from '../mapped/descriptors.js'
import type { MappedFile } from '../mapped/mapped-file.js'

export class ScanMappings {
  private readonly handles = new Map<number, MapHandle | null>()

  constructor(private readonly files: readonly MappedFile[]) {}

  /** Bytes [from, to) of file `index`, as the store's own readableBuffer gives them. */
  read(index: number, from: number, to: number): Buffer {
    const file = this.files[index]
    let handle = this.handles.get(index)
    if (handle === undefined) {
      handle = mapForScan(file)
      this.handles.set(index, handle)
    }
    if (handle === null) return file.readableBuffer().subarray(from, to)
    return Buffer.from(handle.buffer).subarray(from, Math.min(to, file.readPosition))
  }

  /** Copies bytes from `from` of file `index` into `target`, up to what the file holds; returns how many. */
  readInto(index: number, from: number, target: Buffer): number {
    const file = this.files[index]
    const length = Math.min(target.length, file.readPosition - from)
    if (length <= 0) return 0
    let got = 0
    try {
      descriptors.use(file.fileName, false, (fd) => {
        while (got < length) {
          const n = fs.readSync(fd, target, got, length - got, from + got)
          // The file is shorter than the store believes: the scan meets the end of what was read.
          if (n === 0) break
          got += n
        }
      })
    } catch (cause) {
      throw ioError(`cannot read ${file.fileName}`, cause)
    }
    return got
  }

  /** Unmaps every mapping made. */
  close(): void {
    for (const handle of this.handles.values()) handle?.close()
    this.handles.clear()
  }
}

/** A private read-only mapping of the whole file, or null when one cannot be made (the scan reads the store's). */
function mapForScan(file: MappedFile): MapHandle | null {
  try {
    return descriptors.use(file.fileName, false, (fd) => native.map(fd, file.fileSize, false))
  } catch {
    return null
  }
}
