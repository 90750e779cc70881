// The directory lock: one writer process per store. The lock file (RocketMQ's `lock`) is locked
// with flock and with an fcntl lock, the kind a RocketMQ broker takes, so neither can open a
// directory the other holds. It is kept open for the store's lifetime; closing the descriptor
// releases both even if unlocking fails.
// The file names its holder ({"pid":…,"host":…}), so a refused open can say who holds the store.
// RocketMQ writes "lock" into the same file and reads nothing from it.
//
// flock refuses a second open file description even within one process, so a store opened twice
// in one process would look "locked by another process": a process-wide set of held lock files
// tells the two cases apart. It is consulted before the file is opened at all: where fcntl locks
// belong to the process (macOS), closing any descriptor of the file would drop the holder's lock.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { hostname } from 'node:os'
import { dirname } from 'node:path'

import { ioError, MQStoreError } from '../errors.js'
import { native } from '../native.js'

/** Lock files held by stores open in this process (real paths). */
const heldInThisProcess = new Set<string>()

/** Who holds a lock, as written into the lock file. */
export interface LockHolder {
  pid: number
  host: string
}

export class StoreLock {
  private constructor(
    private fd: number,
    private readonly key: string,
  ) {}

  /** Opens and locks `path`; a store locked elsewhere, or already open in this process, is `LOCKED`. */
  static take(path: string): StoreLock {
    const dir = dirname(path)
    if (heldInThisProcess.has(realPath(path))) {
      throw new MQStoreError(
        'LOCKED',
        `the store at ${dir} is already open in this process (pid ${process.pid}): close it first, or share that instance`,
      )
    }
    let fd: number
    try {
      fd = fs.openSync(path, 'a+')
    } catch (cause) {
      throw ioError(`cannot open the lock file ${path}`, cause)
    }
    const key = realPath(path)
    try {
      native.lockFile(fd)
    } catch (cause) {
      fs.closeSync(fd)
      const code = (cause as NodeJS.ErrnoException).code
      // EACCES: how some systems report an fcntl lock held elsewhere.
      if (code === 'EAGAIN' || code === 'EWOULDBLOCK' || code === 'EACCES') {
        // RocketMQ writes "lock" into the file: then the holder is not named.
        const holder = readHolder(path)
        const who =
          holder === null
            ? 'another process (an mqstore or a RocketMQ broker)'
            : `another process (pid ${holder.pid} on host ${holder.host})`
        throw new MQStoreError('LOCKED', `the store at ${dir} is locked by ${who}`, { cause })
      }
      throw ioError(`cannot lock ${path}`, cause)
    }
    try {
      const text = `${JSON.stringify({ pid: process.pid, host: hostname() } satisfies LockHolder)}\n`
      // A reopen by the same process finds its own name there: rewriting it would free and take a
      // block again (a journal transaction) for nothing.
      const found = Buffer.alloc(text.length + 1)
      if (fs.readSync(fd, found, 0, found.length, 0) !== text.length || found.toString('utf8', 0, text.length) !== text) {
        fs.ftruncateSync(fd, 0)
        fs.writeSync(fd, text, 0)
      }
    } catch {
      // Naming the holder is a courtesy: the locks alone exclude other writers.
    }
    heldInThisProcess.add(key)
    return new StoreLock(fd, key)
  }

  /** Unlocks and closes; idempotent. */
  release(): void {
    if (this.fd < 0) return
    const fd = this.fd
    this.fd = -1
    heldInThisProcess.delete(this.key)
    try {
      native.unlockFile(fd)
    } catch {
      // closing the descriptor releases the lock anyway
    }
    fs.closeSync(fd)
  }
}

/** The holder a lock file names, or null (an older file holds "lock", or nothing readable). */
export function readHolder(path: string): LockHolder | null {
  try {
    const parsed = JSON.parse(fs.readFileSync(path, 'utf8')) as Partial<LockHolder>
    if (typeof parsed.pid === 'number' && typeof parsed.host === 'string') return { pid: parsed.pid, host: parsed.host }
  } catch {
    // not written by this store
  }
  return null
}

function realPath(path: string): string {
  try {
    // The C library's realpath: one call, where the JavaScript one stats each part of the path.
    return fs.realpathSync.native(path)
  } catch {
    return path
  }
}
