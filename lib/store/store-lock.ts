// The directory lock: one writer process per store. The lock file (RocketMQ's `lock`) is locked
// with flock and with an fcntl lock, the kind a RocketMQ broker takes, so neither can open a
// directory the other holds. It is kept open for the store's lifetime; closing the descriptor
// releases both even if unlocking fails.
import * as fs from 'node:fs'
import { dirname } from 'node:path'

import { ioError, MQStoreError } from '../errors.js'
import { native } from '../native.js'

export class StoreLock {
  private constructor(private fd: number) {}

  /** Opens and locks `path`; a store locked elsewhere is `LOCKED`. */
  static take(path: string): StoreLock {
    let fd: number
    try {
      fd = fs.openSync(path, 'a+')
    } catch (cause) {
      throw ioError(`cannot open the lock file ${path}`, cause)
    }
    try {
      native.lockFile(fd)
    } catch (cause) {
      fs.closeSync(fd)
      const code = (cause as NodeJS.ErrnoException).code
      // EACCES: how some systems report an fcntl lock held elsewhere.
      if (code === 'EAGAIN' || code === 'EWOULDBLOCK' || code === 'EACCES') {
        throw new MQStoreError('LOCKED', `the store at ${dirname(path)} is locked by another process (an mqstore or a RocketMQ broker)`, { cause })
      }
      throw ioError(`cannot lock ${path}`, cause)
    }
    if (fs.fstatSync(fd).size === 0) fs.writeSync(fd, 'lock')
    return new StoreLock(fd)
  }

  /** Unlocks and closes; idempotent. */
  release(): void {
    if (this.fd < 0) return
    const fd = this.fd
    this.fd = -1
    try {
      native.unlockFile(fd)
    } catch {
      // closing the descriptor releases the lock anyway
    }
    fs.closeSync(fd)
  }
}
