// Interposes on node:fs's fdatasync (async and sync) for tests of syncs the store makes through
// the file system rather than a mapping: SYNC_FLUSH's staged commit log (write-stage.ts) syncs
// with fdatasync. The store imports node:fs as an ES module namespace, which follows the CommonJS
// object once syncBuiltinESMExports() runs.
import * as fs from 'node:fs'
import { createRequire, syncBuiltinESMExports } from 'node:module'

const fsCjs = createRequire(import.meta.url)('node:fs') as typeof fs

type Callback = (error: NodeJS.ErrnoException | null) => void

export interface FdatasyncHooks {
  /** An fdatasync(fd): call `original(fd, callback)` to sync for real, or answer `callback` yourself. */
  async(fd: number, callback: Callback, original: (fd: number, callback: Callback) => void): void
  /** fdatasyncSync(fd): throw to fail it; `original` syncs for real. */
  sync?(fd: number, original: (fd: number) => void): void
}

/** Installs `hooks` until the returned restore() is called. */
export function interposeFdatasync(hooks: FdatasyncHooks): () => void {
  const savedAsync = fsCjs.fdatasync
  const savedSync = fsCjs.fdatasyncSync
  const original = (fd: number, callback: Callback): void => savedAsync(fd, callback)
  ;(fsCjs as { fdatasync: unknown }).fdatasync = (fd: number, callback: Callback) => hooks.async(fd, callback, original)
  if (hooks.sync !== undefined) {
    const onSync = hooks.sync
    ;(fsCjs as { fdatasyncSync: unknown }).fdatasyncSync = (fd: number) => onSync(fd, (d) => savedSync(d))
  }
  syncBuiltinESMExports()
  return () => {
    fsCjs.fdatasync = savedAsync
    fsCjs.fdatasyncSync = savedSync
    syncBuiltinESMExports()
  }
}

/** The size of the file open at `fd` (-1 if it cannot be read): how tests tell commit-log files apart. */
export function sizeOfFd(fd: number): number {
  try {
    return fs.fstatSync(fd).size
  } catch {
    return -1
  }
}
