// Directory fsync: a created, renamed or unlinked file is durable only once its directory is synced.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { dirname } from 'node:path'

import { ioError } from '../../errors.js'

/**
 * Codes with which a file system says it cannot fsync a directory at all (some network and FUSE
 * file systems). The rename or unlink is still atomic there; there is nothing more to force.
 */
const UNSUPPORTED = new Set(['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR', 'EBADF'])

/**
 * fsync of the directory that holds `fileName` (relative names resolve against the working
 * directory: the directory of "abort" is "."), so a create, rename or unlink survives a power cut.
 * Throws an MQStoreError (IO_ERROR, NO_SPACE) for any other failure: an EIO here means the
 * directory entry may not be on disk.
 */
export function syncDirectory(fileName: string): void {
  const dir = dirname(fileName)
  let fd = -1
  try {
    fd = fs.openSync(dir, 'r')
    fs.fsyncSync(fd)
  } catch (cause) {
    if (!UNSUPPORTED.has((cause as NodeJS.ErrnoException)?.code ?? '')) {
      throw ioError(`cannot sync directory ${dir}`, cause)
    }
  } finally {
    if (fd >= 0) fs.closeSync(fd)
  }
}

/**
 * mkdir -p that survives a power cut: every directory it creates is made durable in its parent
 * (a file synced into a directory whose own entry was never synced can vanish with it). Costs
 * nothing beyond the mkdir when the directory exists.
 */
export function ensureDirectory(dir: string): void {
  const first = fs.mkdirSync(dir, { recursive: true })
  if (first === undefined) return
  // Sync the parent of each created directory, from the first one created down to `dir`.
  for (let created = dir; ; created = dirname(created)) {
    syncDirectory(created)
    if (created === first || dirname(created) === created) break
  }
}

/** fsync of the file at `path` (its bytes and its size), on the libuv pool: a file made there before it gets its name. */
export async function syncFileAsync(path: string): Promise<void> {
  // Callback-style fs, as syncDirectoryAsync's.
  const fd = await new Promise<number>((resolve, reject) => fs.open(path, 'r+', (err, opened) => (err ? reject(err) : resolve(opened))))
  try {
    await new Promise<void>((resolve, reject) => fs.fsync(fd, (err) => (err ? reject(err) : resolve())))
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * syncDirectory on the libuv pool, for flushes that force many new files at once (their syncs
 * then share the file system's journal commits instead of queueing behind one another).
 */
export async function syncDirectoryAsync(fileName: string): Promise<void> {
  const dir = dirname(fileName)
  // Callback-style fs (not fs.promises): one code path for every sync, which the tests' power-loss
  // model observes.
  let fd = -1
  try {
    fd = await new Promise<number>((resolve, reject) => fs.open(dir, 'r', (err, opened) => (err ? reject(err) : resolve(opened))))
    await new Promise<void>((resolve, reject) => fs.fsync(fd, (err) => (err ? reject(err) : resolve())))
  } catch (cause) {
    if (!UNSUPPORTED.has((cause as NodeJS.ErrnoException)?.code ?? '')) {
      throw ioError(`cannot sync directory ${dir}`, cause)
    }
  } finally {
    if (fd >= 0) fs.closeSync(fd)
  }
}

/**
 * Replaces `path` with `text` (or bytes) so that a crash or a power cut leaves the old or the new content,
 * never a mix: the directory is created (durably) if needed, the text goes to `<path>.tmp` and is
 * synced, the old file is kept as `<path>.bak` when `backup` is set (readers fall back to it), then
 * the rename and the directory sync.
 */
export function writeFileDurably(path: string, text: string | Uint8Array, options: { backup?: boolean } = {}): void {
  ensureDirectory(dirname(path))
  const temp = `${path}.tmp`
  const fd = fs.openSync(temp, 'w')
  try {
    fs.writeSync(fd, typeof text === 'string' ? Buffer.from(text) : text)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  if (options.backup === true && fs.existsSync(path)) fs.copyFileSync(path, `${path}.bak`)
  fs.renameSync(temp, path)
  syncDirectory(path)
}

/**
 * The reading side of writeFileDurably with `backup`: the parsed content of `path`, or of
 * `<path>.bak` when `path` is missing, empty or does not parse; null when neither does.
 */
export function readFileWithBackup(path: string, parse: (text: string) => unknown = JSON.parse): unknown {
  return parseFile(path, parse) ?? parseFile(`${path}.bak`, parse)
}

/**
 * The text of `path`, or null when there is no such file. Most of the files an open reads are
 * optional and usually absent; asking whether one exists costs a fraction of the exception a
 * failed read throws. A file removed between the check and the read counts as absent; other read
 * errors are thrown.
 */
export function readTextIfExists(path: string): string | null {
  if (!fs.existsSync(path)) return null
  try {
    return fs.readFileSync(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw error
  }
}

function parseFile(path: string, parse: (text: string) => unknown): unknown {
  let text: string | null
  try {
    text = readTextIfExists(path)
  } catch {
    return null
  }
  if (text === null || text.trim() === '') return null
  try {
    return parse(text)
  } catch {
    return null
  }
}

/** Deletes a file nothing holds any more (what a creation given up left); best effort: a file left behind is one a load removes or passes over. */
export function removeQuietly(path: string): void {
  try {
    fs.rmSync(path, { force: true })
  } catch {
    // See above.
  }
}
