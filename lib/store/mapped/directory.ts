// Directory fsync: a created, renamed or unlinked file is durable only once its directory is synced.
import * as fs from 'node:fs'

/** fsync of the directory that holds `fileName`, so a rename or unlink survives a power cut. */
export function syncDirectory(fileName: string): void {
  const dir = fileName.slice(0, Math.max(1, fileName.lastIndexOf('/')))
  let fd = -1
  try {
    fd = fs.openSync(dir, 'r')
    fs.fsyncSync(fd)
  } catch {
    // Some file systems refuse fsync on directories; the rename itself is still atomic.
  } finally {
    if (fd >= 0) fs.closeSync(fd)
  }
}
