// Opening a consume queue that a clean reopen deferred (see ConsumeQueueTable): on its first use it
// is loaded and its end found by bisection, and it gets the checks a full open gives every queue
// (its last unit points at its own record in the commit log; its min offset follows the log's);
// a queue that fails them is rebuilt from the commit log alone, not the whole store. Its end is
// also compared with the one the queue-ends file recorded at the close (Q6 for one queue): units
// lost behind zeros at a queue's tail leave a clean-looking prefix, shorter than it was.
import { checkRecord, type DispatchRequest } from '../commitlog/record.js'
import { isQueuedRecord } from '../commitlog/sys-flag.js'
import type { CommitLog } from '../commitlog/commit-log.js'
import { isOutOfDescriptors } from '../mapped/descriptors.js'
import { ConsumeQueue } from '../queue/consume-queue.js'
import type { StoreCheckpoint } from '../store-checkpoint.js'
import { lastUnitMatches } from './recovery-plan.js'

/**
 * Loads, recovers and checks a deferred queue; sets its next offset in the commit log's table.
 * `recordedEnd` is the queue's max offset at the last clean close, null when not known.
 */
export function openDeferredQueue(
  commitLog: CommitLog,
  checkpoint: Pick<StoreCheckpoint, 'withdrawLogics'>,
  queue: ConsumeQueue,
  repair: (action: string, reason: string) => void,
  recordedEnd: number | null = null,
): void {
  let failure: string | null = null
  try {
    queue.load()
    // The shutdown record vouches for a clean prefix of units: anything else was damaged since.
    if (!queue.recoverClean(recordedEnd)) failure = 'its last file is not a clean run of units followed by zeros'
    else failure = lastUnitFailure(commitLog, queue) ?? endFailure(queue, recordedEnd)
  } catch (error) {
    // Out of descriptors says nothing about the files: the queue stays deferred, the caller retries.
    if (isOutOfDescriptors(error)) throw error
    failure = (error as Error).message
  }
  if (failure !== null) {
    checkpoint.withdrawLogics()
    queue.destroy()
    rebuildQueue(commitLog, queue)
    repair(`deleted consume queue ${queue.topic}/${queue.queueId} to rebuild it`, failure)
  }
  commitLog.topicQueueTable.set(queue.topic, queue.queueId, queue.getMaxOffsetInQueue())
  const minPhy = commitLog.getMinOffset()
  queue.correctMinOffset(minPhy)
  if (minPhy > 0) queue.deleteExpiredFile(minPhy)
}

/** Why the queue's last unit cannot be trusted, or null when it points at its own record. */
function lastUnitFailure(commitLog: CommitLog, queue: ConsumeQueue): string | null {
  const max = queue.getMaxOffsetInQueue()
  if (max === 0 || max - 1 < queue.getMinOffsetInQueue()) return null
  const units = queue.getIndexBuffer(max - 1)
  if (units === null) return null
  const phy = ConsumeQueue.readOffset(units.buffer, 0)
  const size = ConsumeQueue.readSize(units.buffer, 0)
  units.release()
  if (phy < commitLog.getMinOffset()) return null
  const found = commitLog.getMessage(phy, size)
  const request = found === null ? null : checkRecord(found.buffer, 0, size, false)
  found?.release()
  if (lastUnitMatches(request, { size, topic: queue.topic, queueId: queue.queueId, queueOffset: max - 1 })) return null
  return `its last unit (queue offset ${max - 1}) does not match the commit log`
}

/** Why the queue's end differs from the one recorded at the close, or null when it does not (or is not known). */
function endFailure(queue: ConsumeQueue, recordedEnd: number | null): string | null {
  const max = queue.getMaxOffsetInQueue()
  if (recordedEnd === null || max === recordedEnd) return null
  return `it ends at queue offset ${max}, not at the ${recordedEnd} the last clean close recorded`
}

/** Writes the queue's units again from every record of it in the commit log. */
function rebuildQueue(commitLog: CommitLog, queue: ConsumeQueue): void {
  let offset = Math.max(0, commitLog.getMinOffset())
  while (offset < commitLog.getMaxOffset()) {
    const view = commitLog.getData(offset)
    if (view === null) break
    let next = -1
    try {
      offset = view.startOffset
      let pos = 0
      while (pos < view.size) {
        const request = checkRecord(view.buffer, pos, view.size, false)
        if (request.status === 'OK') {
          if (belongs(request, queue))
            queue.putMessagePositionInfo(request.commitLogOffset, request.size, request.tagsCode, request.queueOffset)
          pos += request.size
        } else {
          // A blank ends the file; a bad record is skipped with the rest of it, as dispatch does.
          next = commitLog.rollNextFile(offset + pos)
          break
        }
      }
      if (next < 0) next = offset + pos
    } finally {
      view.release()
    }
    if (next <= offset) break
    offset = next
  }
}

function belongs(request: DispatchRequest, queue: ConsumeQueue): boolean {
  return request.topic === queue.topic && request.queueId === queue.queueId && isQueuedRecord(request.sysFlag)
}
