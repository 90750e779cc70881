// Index files a load dropped, deleted off the JS thread. Unlinking a file whose pages are cached
// frees every page, tens of milliseconds for a full index file, which the recovery's scan then does
// not wait for.
import * as fs from 'node:fs'

import type { IndexFile } from './index-file.js'

export class IndexDeletions {
  private readonly pending = new Set<Promise<void>>()

  /**
   * Renames the file to a `.tmp` name now (a leftover that the next load removes, whatever happens
   * before the deletion ends) and deletes it on the libuv pool.
   */
  delete(file: IndexFile): void {
    const mapped = file.getMappedFile()
    mapped.shutdown(0)
    const leftover = `${file.fileName}.tmp`
    try {
      if (!mapped.isCleanupOver()) throw new Error('still held')
      fs.renameSync(file.fileName, leftover)
    } catch {
      file.destroy(0)
      return
    }
    const deletion = fs.promises
      .rm(leftover, { force: true })
      .catch(() => undefined)
      .finally(() => {
        this.pending.delete(deletion)
      })
    this.pending.add(deletion)
  }

  /** Settles once every file handed to delete() is deleted. */
  async done(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending])
  }
}
