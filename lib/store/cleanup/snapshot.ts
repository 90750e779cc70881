// Reads what the cleanup policies decide from: the files of the commit log, consume queues and
// index with their offsets, times, sizes and holders, and the disk usage of their partitions.
// The only impure part of cleanup's decisions; the policies take what this returns.
import * as fs from 'node:fs'
import { basename, dirname } from 'node:path'

import type { CommitLog } from '../commitlog/commit-log.js'
import type { DiskUsageSource } from '../environment.js'
import type { IndexService } from '../index/index-service.js'
import type { MappedFile } from '../mapped/mapped-file.js'
import type { ConsumeQueue } from '../queue/consume-queue.js'
import { CQ_STORE_UNIT_SIZE, readUnitOffset } from '../queue/cq-unit.js'
import type { CommitLogFileInfo } from './commit-log-policy.js'
import type { ConsumeQueueFilesInfo, IndexFileInfo } from './derived-policy.js'
import type { DiskReading } from './disk-policy.js'

export function commitLogFiles(commitLog: CommitLog): CommitLogFileInfo[] {
  return commitLog.mappedFileQueue.mappedFiles.map((file) => commitLogFileInfo(file))
}

function commitLogFileInfo(file: MappedFile): CommitLogFileInfo {
  const available = file.isAvailable()
  // While available the owner holds one reference; after a shutdown only readers do.
  const holders = Math.max(0, file.getRefCount() - (available ? 1 : 0))
  return {
    name: basename(file.fileName),
    startOffset: file.fileFromOffset,
    sizeBytes: file.fileSize,
    lastModifiedMs: file.getLastModifiedTimestamp(),
    holders,
    available,
    shutdownAtMs: file.getFirstShutdownTimestamp(),
  }
}

export function consumeQueueFiles(queue: ConsumeQueue): ConsumeQueueFilesInfo {
  const files = queue.mappedFileQueue.mappedFiles.map((file) => {
    let lastUnitPhyOffset: number | null = null
    const last = file.selectMappedBuffer(file.fileSize - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)
    if (last !== null) {
      lastUnitPhyOffset = readUnitOffset(last.buffer, 0)
      last.release()
    }
    return {
      name: basename(file.fileName),
      startOffset: file.fileFromOffset,
      sizeBytes: file.fileSize,
      lastUnitPhyOffset,
      available: file.isAvailable(),
    }
  })
  return { topic: queue.topic, queueId: queue.queueId, files }
}

export function* allConsumeQueueFiles(queues: Iterable<ConsumeQueue>): Generator<ConsumeQueueFilesInfo> {
  for (const queue of queues) yield consumeQueueFiles(queue)
}

export function indexFiles(index: IndexService | null): IndexFileInfo[] {
  if (index === null) return []
  return index.getFiles().map((file) => ({
    name: basename(file.getFileName()),
    sizeBytes: file.fileSize,
    endPhyOffset: file.getEndPhyOffset(),
  }))
}

/**
 * Usage of the partition holding `path`. A folder that does not exist yet (no consume queue was
 * written) is judged by the nearest existing parent, which is on the partition it will be made on.
 */
export function readDisk(source: DiskUsageSource, role: DiskReading['role'], path: string): DiskReading {
  let probe = path
  while (!fs.existsSync(probe) && dirname(probe) !== probe) probe = dirname(probe)
  try {
    const usage = source.usage(probe)
    return { role, path, usedRatio: usage.usedRatio, totalBytes: usage.totalBytes, availableBytes: usage.availableBytes }
  } catch (error) {
    return { role, path, usedRatio: -1, totalBytes: 0, availableBytes: 0, error: (error as Error).message }
  }
}
