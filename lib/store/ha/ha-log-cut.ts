// Cutting a replica's log on a live store, as recovery cuts it at open: to a record boundary, the
// commit log first, then every consume queue's units at or past the cut, then the next queue
// offsets puts take. Used when a slave is promoted (a torn tail no frame will complete) and when
// a slave is cut back to its new master (setBrokerRole's truncateToMaster).
import { BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, OFFSET_MAGIC, OFFSET_TOTALSIZE } from '../commitlog/record.js'
import type { CommitLog } from '../commitlog/commit-log.js'
import type { CompactedTopics } from '../compaction/compacted-topics.js'
import type { DispatchTargets } from '../dispatch-targets.js'
import type { Dispatcher } from '../dispatcher.js'
import type { IndexService } from '../index/index-service.js'
import type { ConsumeQueueTable } from '../queue/queue-table.js'
import { resetQueueOffsets } from '../recovery/store-recovery.js'

/** A record's size and magic code: what a walk over the log reads of each. */
const RECORD_HEAD_BYTES = 8

/**
 * The last record boundary at or before `limit`, walking whole records from `from` (itself a
 * boundary: a file's start or a dispatched offset). A record that is not whole below `limit`, or
 * does not look like one, ends the walk at its start; an end-of-file blank leads to the next file.
 */
export function lastRecordBoundary(commitLog: CommitLog, from: number, limit: number): number {
  let at = from
  while (at < limit) {
    const view = commitLog.getData(at, false)
    if (view === null) return at
    let pos = 0
    let rolled = false
    try {
      const buffer = view.buffer
      while (pos + RECORD_HEAD_BYTES <= view.size) {
        const size = buffer.readInt32BE(pos + OFFSET_TOTALSIZE)
        const magic = buffer.readInt32BE(pos + OFFSET_MAGIC)
        if (magic === BLANK_MAGIC_CODE) {
          rolled = true
          break
        }
        if (magic !== MESSAGE_MAGIC_CODE || size <= RECORD_HEAD_BYTES || pos + size > view.size || at + pos + size > limit) break
        pos += size
      }
    } finally {
      view.release()
    }
    if (!rolled) return at + pos
    const next = commitLog.rollNextFile(at + pos)
    if (next > limit) return at + pos
    at = next
  }
  return at
}

/** The last record boundary at or before `offset`, walking from the start of its file (a boundary). */
export function boundaryAtOrBefore(commitLog: CommitLog, offset: number): number {
  const size = commitLog.mappedFileQueue.mappedFileSize
  const fileStart = Math.max(commitLog.getMinOffset(), offset - (offset % size))
  return fileStart >= offset ? fileStart : lastRecordBoundary(commitLog, fileStart, offset)
}

/** The boundary after the record (or end-of-file blank) at the boundary `offset`; -1 when none is whole there. */
export function nextBoundary(commitLog: CommitLog, offset: number): number {
  const view = commitLog.getData(offset, false)
  if (view === null) return -1
  try {
    if (view.size < RECORD_HEAD_BYTES) return -1
    const magic = view.buffer.readInt32BE(OFFSET_MAGIC)
    if (magic === BLANK_MAGIC_CODE) return commitLog.rollNextFile(offset)
    const size = view.buffer.readInt32BE(OFFSET_TOTALSIZE)
    return magic === MESSAGE_MAGIC_CODE && size > RECORD_HEAD_BYTES && size <= view.size ? offset + size : -1
  } finally {
    view.release()
  }
}

export interface LogCutHost {
  readonly compacted: CompactedTopics
  readonly commitLog: CommitLog
  readonly dispatcher: Dispatcher
  readonly queues: ConsumeQueueTable
  readonly targets: DispatchTargets
  index(): IndexService
  /** Deletes the index files (a repair in stats()). */
  discardIndex(reason: string): void
}

/**
 * Cuts the log at `offset` (a record boundary): the commit log's tail is erased, consume-queue
 * units at or past it go (queues opened on first use are opened for it), dispatch resumes there
 * and puts take the queues' new ends. An index that saw records past the cut is rebuilt from the
 * log as open rebuilds it (it only grows in commit-log order, so it would skip the new records
 * at those offsets): a pass over the whole log, on the calling thread.
 */
export function cutLog(host: LogCutHost, offset: number): void {
  const { commitLog, dispatcher, queues, targets } = host
  if (offset >= commitLog.getMaxOffset()) return
  const dispatched = Math.min(dispatcher.reputFromOffset, offset)
  if (offset <= Math.max(0, commitLog.getMinOffset())) {
    emptyLog(host)
    return
  }
  commitLog.truncateTo(offset)
  for (const queue of queues.allOpening()) queue.truncateDirtyLogicFiles(offset)
  dispatcher.reputFromOffset = dispatched
  const files = host.index().getFiles()
  if (files.length > 0 && files[files.length - 1].getEndPhyOffset() >= offset) {
    host.discardIndex(`it indexes records at or past ${offset}, where the commit log was cut`)
    dispatcher.reputFromOffset = Math.max(0, commitLog.getMinOffset())
    // The queues hold every record below `dispatched`: only the index is built for those.
    targets.queuesCompleteTo = dispatched
    try {
      dispatcher.doReput()
    } finally {
      targets.queuesCompleteTo = -1
    }
  }
  resetQueueOffsets(commitLog, queues)
}

/**
 * A cut at the log's start: nothing is left, so the files go too, and the store starts where its
 * master's frames start, as a new slave does (the master's last file: a report of 0).
 */
function emptyLog(host: LogCutHost): void {
  const { commitLog, dispatcher, queues } = host
  commitLog.truncateTo(Math.max(0, commitLog.getMinOffset()))
  while (commitLog.mappedFileQueue.mappedFiles.length > 0) commitLog.mappedFileQueue.deleteLastMappedFile()
  queues.destroyAll()
  if (host.index().getFileCount() > 0) host.discardIndex('the commit log was cut back to its start')
  dispatcher.reputFromOffset = 0
  resetQueueOffsets(commitLog, queues)
}

/**
 * After a cut: the compaction logs of compacted topics hold copies of their queues' records, and
 * are cut back to their queues' new ends (each under the cleaner's pause) before anything is
 * dispatched past the cut.
 */
export async function cutCompactionLogs(host: LogCutHost): Promise<void> {
  const service = host.compacted.service
  for (const { topic, queueId } of service.queues()) {
    const end = host.queues.find(topic, queueId)?.getMaxOffsetInQueue() ?? 0
    if (service.maxOffset(topic, queueId) > end) await service.truncate(topic, queueId, end)
  }
}
