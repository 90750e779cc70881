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
// - the small files (consumer offsets, topics, sizes, checkpoint), which were read as they are;
// - the folders of everything above, and the index folder (the files a crash recovery deletes).
// Index files are not synced: those recovery keeps were synced when they rolled (the checkpoint's
// index time says so), and the newer ones were deleted to be rebuilt.
//
// msync (or fdatasync) of a file whose pages are clean costs a walk over its dirty pages (none)
// and a journal commit or drive cache flush, whatever the file's size; see docs/recovery.md for
// the figures.
import * as fs from 'node:fs'
import { join } from 'node:path'

import type { CommitLog } from '../commitlog/commit-log.js'
import { ioError, MQStoreError } from '../../errors.js'
import { descriptors } from '../mapped/descriptors.js'
import { syncDirectory } from '../mapped/directory.js'
import type { MappedFile } from '../mapped/mapped-file.js'
import type { ConsumeQueueTable } from '../queue/queue-table.js'
import { readUnitOffset, readUnitSize } from '../queue/cq-unit.js'
import type { StorePaths } from '../store-paths.js'

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

/** Forces what a recovery after a crash keeps (see above); returns what it synced. */
export function syncRecoveredFiles(input: CrashSyncInput): CrashSyncFigures {
  const { paths, commitLog, queues, scanStart } = input
  const figures: CrashSyncFigures = { commitLogFiles: 0, consumeQueueFiles: 0, otherFiles: 0, directories: 0 }
  const folders = new Set<string>([paths.commitLog, paths.consumeQueues, paths.index, paths.config, paths.root])

  const logFileSize = commitLog.mappedFileQueue.mappedFileSize
  for (const file of commitLog.mappedFileQueue.mappedFiles) {
    if (file.fileFromOffset + logFileSize <= scanStart) continue
    syncing(file.fileName, () => forceFromStart(file))
    figures.commitLogFiles++
  }

  const unit = Buffer.alloc(12)
  for (const queue of queues.all()) {
    const files = queue.mappedFileQueue.mappedFiles
    for (let i = files.length - 1; i >= 0; i--) {
      const file = files[i]
      const firstUnitBelow = syncing(file.fileName, () => {
        forceFromStart(file)
        // Read through the file, not a mapping: a queue's older files need not be mapped.
        const read = descriptors.use(file.fileName, false, (fd) => fs.readSync(fd, unit, 0, unit.length, 0))
        return read === unit.length && readUnitSize(unit, 0) > 0 && readUnitOffset(unit, 0) < scanStart
      })
      figures.consumeQueueFiles++
      if (firstUnitBelow) break
    }
    if (files.length > 0) {
      folders.add(queue.storePath)
      folders.add(paths.consumeQueueTopic(queue.topic))
    }
  }

  const small = [paths.checkpoint, ...listFiles(paths.config)]
  for (const path of small) {
    if (!syncing(path, () => syncFileIfPresent(path))) continue
    figures.otherFiles++
  }

  // Deepest first: a folder's entry in its parent is synced after its own entries.
  for (const folder of [...folders].sort((a, b) => b.length - a.length)) {
    if (!fs.existsSync(folder)) continue
    syncDirectory(join(folder, 'entry')) // syncs the folder that holds the entry
    figures.directories++
  }
  return figures
}

/**
 * Forces bytes [0, readPosition) of a file: msync over its mapping (fdatasync when it is not
 * mapped). flush() syncs from the flushed position, which recovery set to the recovered end.
 */
function forceFromStart(file: MappedFile): void {
  file.flushedPosition = 0
  file.flush(0)
}

/** A failed sync is an IO_ERROR (or NO_SPACE...) naming the file: open() fails rather than serve what may be lost. */
function syncing<T>(path: string, run: () => T): T {
  try {
    return run()
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

function syncFileIfPresent(path: string): boolean {
  let fd = -1
  try {
    fd = fs.openSync(path, 'r')
  } catch {
    return false
  }
  try {
    fs.fdatasyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  return true
}
