// After a crash, recovery reads the page cache, not the disk. A process crash (SIGKILL, OOM kill,
// abort) keeps the page cache, so the records, units and names the dead process wrote and never
// synced are there to recover, and lost all the same if the power goes before the kernel writes
// them back. Recovery positions the flush marks at the recovered ends, so no later flush would
// ever sync them: a later power cut could then lose recovered records while SYNC_FLUSH puts
// acknowledged after them survive behind the hole, and the next recovery, which stops at the
// hole, drops those acknowledged puts too. And the checkpoint's timestamps, written after later
// flushes, would claim them synced, so that recovery would not even look for them.
//
// So before open() returns after an abnormal shutdown, everything recovery keeps beyond what the
// checkpoint proves synced is forced to disk, data first, then directory entries:
// - the commit-log files from the one the scan started at (the checkpoint's safe time says every
//   record before it was synced) to the end;
// - each consume queue's files, newest first, down to the first one whose first unit points below
//   that scan start (the consume-queue flush syncs a queue's units in order before it moves the
//   checkpoint's logical time, and the scan start is no later than that time);
// - the small files (consumer offsets, topics, sizes, checkpoint), which were read as they are,
//   and every compaction-log file with the cleaner checkpoint;
// - the folders of everything above, and the index folder (the files a crash recovery deletes).
// Index files are not synced: those recovery keeps were synced when they rolled (the checkpoint's
// index time says so), and the newer ones were deleted to be rebuilt. After a crash of this boot
// the newer ones are kept as the page cache holds them: a later power cut deletes them again (the
// next boot's open cannot trust them), so they need no sync either.
//
// msync (or fdatasync) of a file whose pages are clean costs a walk over its dirty pages (none)
// and a journal commit or drive cache flush, whatever the file's size. The syncs run on the libuv
// pool, several at once, so that they share journal commits and drive flushes (a store with
// thousands of queues syncs thousands of files and folders); see docs/recovery.md for figures.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { join } from 'node:path'

import { ioError, MQStoreError } from '../../errors.js'
import type { CommitLog } from '../commitlog/commit-log.js'
import { descriptors } from '../mapped/descriptors.js'
import { syncDirectoryAsync } from '../mapped/directory.js'
import type { MappedFile } from '../mapped/mapped-file.js'
import type { ConsumeQueue } from '../queue/consume-queue.js'
import type { ConsumeQueueTable } from '../queue/queue-table.js'
import { readUnitOffset, readUnitSize } from '../queue/cq-unit.js'
import type { StorePaths } from '../store-paths.js'

/** Syncs in flight at once: enough to keep the libuv pool (4 threads by default) busy. */
const SYNCS_IN_FLIGHT_MAX = 16

export interface CrashSyncInput {
  paths: StorePaths
  commitLog: CommitLog
  queues: ConsumeQueueTable
  /** Where the recovery scan started: the checkpoint vouches for everything before it. */
  scanStart: number
}

export interface CrashSyncFigures {
  commitLogFiles: number
  consumeQueueFiles: number
  otherFiles: number
  directories: number
}

/**
 * Starts writing back every commit-log file as soon as open knows the last run crashed, before the
 * recovery scan: the fdatasyncs are all queued on the libuv pool at once, so they run while the
 * scan keeps the JavaScript thread busy, and the crash sync after it finds clean pages. Writing
 * back bytes that the scan then drops does no harm (a truncation erases and syncs them). Resolves
 * with the first failure, or null; never rejects (open may fail before it waits for this).
 */
export function syncCommitLogAhead(fileNames: readonly string[]): Promise<Error | null> {
  if (fileNames.length === 0) return Promise.resolve(null)
  return new Promise((resolve) => {
    let pending = fileNames.length
    let failure: Error | null = null
    const done = (error: Error | null): void => {
      if (error !== null && failure === null) failure = error
      if (--pending === 0) resolve(failure)
    }
    for (const fileName of fileNames) {
      let fd: number
      try {
        fd = fs.openSync(fileName, 'r')
      } catch (cause) {
        done(ioError(`cannot open ${fileName} to sync it after a crash`, cause))
        continue
      }
      fs.fdatasync(fd, (err) => {
        fs.close(fd, () =>
          done(err === null ? null : ioError(`cannot sync ${fileName}, which the recovery after a crash found in the page cache`, err)),
        )
      })
    }
  })
}

/** Forces what a recovery after a crash keeps (see above); resolves with what it synced. */
export async function syncRecoveredFiles(input: CrashSyncInput): Promise<CrashSyncFigures> {
  const { paths, commitLog, queues, scanStart } = input
  const figures: CrashSyncFigures = { commitLogFiles: 0, consumeQueueFiles: 0, otherFiles: 0, directories: 0 }
  const folders = new Set<string>([paths.commitLog, paths.consumeQueues, paths.index, paths.config, paths.root])

  // Data first: the commit log, each queue (its files one after another, newest first), small files.
  const logFileSize = commitLog.mappedFileQueue.mappedFileSize
  const logFiles = commitLog.mappedFileQueue.mappedFiles.filter((file) => file.fileFromOffset + logFileSize > scanStart)
  const queueList = [...queues.all()]
  // Compaction logs are written from dispatch and flushed from their recovered ends too; their
  // files (and the cleaner checkpoint) are few, so every one is synced.
  const compaction = listTree(paths.compaction)
  for (const folder of compaction.folders) folders.add(folder)
  const small = [paths.checkpoint, ...listFiles(paths.config), ...compaction.files]
  await runLimited<() => Promise<void>>(
    [
      ...logFiles.map((file) => async () => {
        await syncing(file.fileName, () => forceFromStart(file))
        figures.commitLogFiles++
      }),
      ...queueList.map((queue) => async () => {
        const synced = await syncQueue(queue, scanStart)
        figures.consumeQueueFiles += synced
        if (queue.mappedFileQueue.mappedFiles.length === 0) return
        folders.add(queue.storePath)
        folders.add(paths.consumeQueueTopic(queue.topic))
      }),
      ...small.map((path) => async () => {
        if (await syncing(path, () => syncFileIfPresent(path))) figures.otherFiles++
      }),
    ],
    (task) => task(),
  )
  // Then the names: every folder that holds what was synced, and the folders above them.
  await runLimited([...folders], async (folder) => {
    if (!fs.existsSync(folder)) return
    await syncDirectoryAsync(join(folder, 'entry')) // syncs the folder that holds the entry
    figures.directories++
  })
  return figures
}

/**
 * Syncs a queue's files from the newest back to the first whose first unit points before the
 * scan start (the files before it were synced before the checkpoint's times moved past them).
 */
async function syncQueue(queue: ConsumeQueue, scanStart: number): Promise<number> {
  const files = queue.mappedFileQueue.mappedFiles
  const unit = Buffer.alloc(12)
  let synced = 0
  for (let i = files.length - 1; i >= 0; i--) {
    const file = files[i]
    await syncing(file.fileName, () => forceFromStart(file))
    synced++
    // Read through the file, not a mapping: a queue's older files need not be mapped.
    const read = descriptors.use(file.fileName, false, (fd) => fs.readSync(fd, unit, 0, unit.length, 0))
    if (read === unit.length && readUnitSize(unit, 0) > 0 && readUnitOffset(unit, 0) < scanStart) break
  }
  return synced
}

/**
 * Forces bytes [0, readPosition) of a file: msync over its mapping (fdatasync when it is not
 * mapped). flushAsync() syncs from the flushed position, which recovery set to the recovered end.
 */
async function forceFromStart(file: MappedFile): Promise<void> {
  file.flushedPosition = 0
  await file.flushAsync(0)
}

/** Runs `work` over `items` with at most SYNCS_IN_FLIGHT_MAX at once; the first failure rejects. */
async function runLimited<T>(items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < items.length) await work(items[next++])
  }
  await Promise.all(Array.from({ length: Math.min(SYNCS_IN_FLIGHT_MAX, items.length) }, worker))
}

/** A failed sync is an IO_ERROR (or NO_SPACE...) naming the file: open() fails rather than serve what may be lost. */
async function syncing<T>(path: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (cause) {
    if (cause instanceof MQStoreError) throw cause
    throw ioError(`cannot sync ${path}, which the recovery after a crash found in the page cache`, cause)
  }
}

function listFiles(dir: string): string[] {
  try {
    return fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => join(dir, entry.name))
  } catch {
    return []
  }
}

/** Every regular file under `dir` and every folder holding one (none when `dir` is missing). */
function listTree(dir: string): { files: string[]; folders: string[] } {
  const files: string[] = []
  const folders: string[] = []
  const walk = (at: string): void => {
    let entries: fs.Dirent[]
    try {
      entries = fs.readdirSync(at, { withFileTypes: true })
    } catch {
      return
    }
    folders.push(at)
    for (const entry of entries) {
      if (entry.isDirectory()) walk(join(at, entry.name))
      else if (entry.isFile()) files.push(join(at, entry.name))
    }
  }
  walk(dir)
  return { files, folders }
}

/** fdatasync of a small file by name, on the libuv pool; false when it is not there. */
async function syncFileIfPresent(path: string): Promise<boolean> {
  let fd: number
  try {
    fd = await new Promise<number>((resolve, reject) => fs.open(path, 'r', (err, opened) => (err ? reject(err) : resolve(opened))))
  } catch {
    return false
  }
  try {
    await new Promise<void>((resolve, reject) => fs.fdatasync(fd, (err) => (err ? reject(err) : resolve())))
  } finally {
    fs.closeSync(fd)
  }
  return true
}
