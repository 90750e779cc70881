// Store recovery at open: reads what was loaded (the abort file's verdict, the shutdown record, the
// consume queues' ends, the commit log's tail, the index's end), asks recovery-plan what to do, and
// does it through the host's hands: truncations, discarded queues, a rebuilt index, repairs.
import { MQStoreError } from '../../errors.js'
import type { CommitLog, RecoveryOutcome, RecoveryProgress } from '../commitlog/commit-log.js'
import { checkRecord, type DispatchRequest } from '../commitlog/record.js'
import type { MessageStoreConfig } from '../config.js'
import type { IndexService } from '../index/index-service.js'
import { ConsumeQueue } from '../queue/consume-queue.js'
import type { ConsumeQueueTable } from '../queue/queue-table.js'
import type { StoreCheckpoint } from '../store-checkpoint.js'
import type { DispatchTargets } from '../dispatch-targets.js'
import type { Dispatcher } from '../dispatcher.js'
import type { IndexFile } from '../index/index-file.js'
import { shutdownRecordDisagreement } from './shutdown-record.js'
import { openDeferredQueue } from './deferred-queue.js'
import { indexEndsPastLog, judgeDamage, judgeQueueSummary, lastUnitMatches, mustTruncateQueues, reputStart } from './recovery-plan.js'

export interface RecoveryHost {
  config: MessageStoreConfig
  commitLog: CommitLog
  queues: ConsumeQueueTable
  checkpoint: StoreCheckpoint
  /** False when the abort file was found: the last run did not close cleanly. */
  lastExitOK: boolean
  /** The last run crashed during this boot: its writes are all in the page cache (boot-identity.ts). */
  afterProcessCrash: boolean
  index(): IndexService
  repair(action: string, reason: string): void
  /** Deletes a queue that cannot be trusted; dispatch rebuilds it. */
  discardQueue(queue: ConsumeQueue, reason: string): void
  /** Deletes the index; dispatch rebuilds it. */
  discardIndex(reason: string): void
  /** Dispatches a record found by the crash scan into the consume queues (not the index). */
  dispatchRecovered(request: DispatchRequest): void
  progress: RecoveryProgress | null
}

export interface RecoveryResult {
  outcome: RecoveryOutcome
  /** The queues lost units since the clean close: dispatch the whole log again. */
  redispatchAll: boolean
  /**
   * Where a trusted shutdown record says every consume queue was complete, or null: a replay for
   * the index below it need not open (deferred) queues whose units are already there.
   */
  dispatchedTo: number | null
  /**
   * After a crash: the commit-log offset from which what recovery kept must be synced (the start
   * of the file the checkpoint names; crash-sync.ts), whatever offset the scan started at.
   */
  syncFrom: number | null
}

/** The open-time decisions of docs/recovery.md, in order. */
export function recoverStore(host: RecoveryHost): RecoveryResult {
  const { commitLog, queues, checkpoint, lastExitOK } = host
  // A valid shutdown record means a clean close flushed every queue: find their ends by
  // bisection. Without one (or when a queue does not look clean), scan as RocketMQ does.
  let record = lastExitOK ? checkpoint.readShutdownRecord() : null
  const disagreement = record === null ? null : shutdownRecordDisagreement(record, checkpoint.timestamps(), commitLog)
  if (disagreement !== null) {
    // RocketMQ's normal recovery, as if there were no record.
    host.repair('ignored the shutdown record and scanned the commit log tail', disagreement)
    record = null
  }
  // With the record, queues are opened on first use (deferred-queue.ts); without it, all now.
  if (record !== null && commitLog.mappedFileQueue.mappedFiles.length > 0) {
    queues.defer({
      unitSum: record.queueUnitSum,
      maxPhysicOffset: record.endOffset,
      ends: record.queueEnds ?? null,
      open: (queue, recordedEnd) => openDeferredQueue(commitLog, checkpoint, queue, host.repair, recordedEnd),
    })
  } else {
    queues.loadListed(host.discardQueue)
  }
  let maxPhyOffsetOfQueues = -1
  // Before the log's recovery: the end of its last file, past which no unit can point.
  const logFilesEnd = commitLog.mappedFileQueue.mappedFiles.length > 0 ? commitLog.mappedFileQueue.getMaxOffset() : Number.POSITIVE_INFINITY
  // After a crash of this boot too, a queue's last file holds its units in order (a torn one
  // last, which makes recoverClean decline): the end is found by bisection there as well.
  const bisect = record !== null || host.afterProcessCrash
  for (const queue of queues.all()) {
    if (!bisect || !queue.recoverClean()) queue.recover(logFilesEnd)
    maxPhyOffsetOfQueues = Math.max(maxPhyOffsetOfQueues, queue.getMaxPhysicOffset())
  }
  if (commitLog.mappedFileQueue.mappedFiles.length === 0) {
    // No commit log: nothing a consume queue or the index points to exists.
    if (queues.topicCount > 0) host.repair('deleted every consume queue', 'the commit log has no files')
    queues.destroyAll()
    // Its end would make the index skip the new records written below it (I4 with an empty log).
    if (host.index().getFileCount() > 0) host.discardIndex('the commit log has no files')
    return { outcome: commitLog.recoverNormally(), redispatchAll: false, dispatchedTo: null, syncFrom: null }
  }
  let redispatchAll = false
  let dispatchedTo: number | null = null
  let syncFrom: number | null = null
  let outcome: RecoveryOutcome | null = null
  if (lastExitOK) {
    if (record !== null) {
      outcome = commitLog.recoverFromShutdownRecord(record.endOffset, record.lastRecordOffset)
      if (outcome === null) {
        host.repair('scanned the commit log tail', 'the shutdown record does not match the files')
        queues.loadListed(host.discardQueue)
        for (const queue of queues.all()) queue.recover(logFilesEnd)
        maxPhyOffsetOfQueues = queues.maxPhysicOffset()
      }
      const mismatch = judgeQueueSummary(record, queues.summary())
      if (mismatch !== null) {
        redispatchAll = true
        host.repair(mismatch.action, mismatch.reason)
      } else if (outcome !== null) {
        dispatchedTo = record.endOffset
      }
    }
    outcome ??= commitLog.recoverNormally(host.progress)
  } else {
    // The scan rebuilds consume-queue tails only: the index is filled afterwards, in order, from
    // where it ends (an index only grows in commit-log order, so indexing the scan's records
    // first would make it skip the older ones it lost).
    const minTimestamp = minRecoveryTimestamp(host)
    syncFrom = commitLog.recoveryStartOffset(minTimestamp)
    const resumeAfter = host.afterProcessCrash ? dispatchedEnd(queues, commitLog) : null
    // The keys of the records the scan indexes go in a batch at a time (IndexService.beginBulk);
    // a failure fails the open, so no key held back is lost to a retry.
    const index = host.index()
    index.beginBulk()
    try {
      outcome = commitLog.recoverAbnormally(minTimestamp, (request) => host.dispatchRecovered(request), host.progress, resumeAfter)
    } catch (error) {
      index.dropBulk()
      throw error
    }
    index.endBulk()
  }
  const decision = judgeDamage(outcome.damage, host.config.corruptionPolicy)
  if (decision !== null && 'refuse' in decision) throw new MQStoreError('CORRUPTION', decision.refuse)
  if (decision !== null) host.repair(decision.repair.action, decision.repair.reason)
  commitLog.truncateTo(outcome.processOffset, dispatchedTo === null)
  if (lastExitOK) {
    // A clean close left every queue within the log: a unit past its end now is damage, and
    // cutting it (Q2) would lose its record for good (dispatch resumes past it): rebuild instead.
    for (const queue of queues.all()) {
      if (queue.getMaxPhysicOffset() > outcome.processOffset && queue.loadDamage === null) {
        queue.loadDamage = `a unit points past the commit log's end (${outcome.processOffset}) after a clean close`
      }
    }
  }
  if (mustTruncateQueues(maxPhyOffsetOfQueues, outcome.processOffset, lastExitOK)) queues.truncateDirtyLogicFiles(outcome.processOffset)
  checkDerivedFiles(host, outcome.processOffset)
  resetQueueOffsets(commitLog, queues)
  return { outcome, redispatchAll, dispatchedTo, syncFrom }
}

/**
 * Cheap checks of the derived files against the recovered commit log: a consume queue whose
 * scan found it damaged in the middle (ConsumeQueue.loadDamage) is rebuilt, each other queue's
 * last unit must point at a record of that queue with that queue offset, and no index file may
 * end past the log. What fails is deleted and rebuilt by dispatch.
 */
function checkDerivedFiles(host: RecoveryHost, commitLogEnd: number): void {
  const { commitLog } = host
  const minOffset = commitLog.getMinOffset()
  for (const queue of [...host.queues.all()]) {
    // Discarded only now: records the crash scan dispatches must not recreate it half-filled.
    if (queue.loadDamage !== null) {
      host.discardQueue(queue, `it is damaged, not short: ${queue.loadDamage}`)
      continue
    }
    const max = queue.getMaxOffsetInQueue()
    if (max === 0 || max - 1 < queue.getMinOffsetInQueue()) continue
    const units = queue.getIndexBuffer(max - 1)
    if (units === null) continue
    const phy = ConsumeQueue.readOffset(units.buffer, 0)
    const size = ConsumeQueue.readSize(units.buffer, 0)
    units.release()
    if (phy < minOffset) continue
    const found = commitLog.getMessage(phy, size)
    const request = found === null ? null : checkRecord(found.buffer, 0, size, false)
    found?.release()
    if (!lastUnitMatches(request, { size, topic: queue.topic, queueId: queue.queueId, queueOffset: max - 1 })) {
      host.discardQueue(queue, `its last unit (queue offset ${max - 1}) does not match the commit log`)
    }
  }
  const files = host.index().getFiles()
  const last = files.length > 0 ? files[files.length - 1] : null
  const lastFile = last === null ? null : { endPhyOffset: last.getEndPhyOffset(), indexCount: last.getIndexCount() }
  if (indexEndsPastLog(lastFile, commitLogEnd)) {
    host.discardIndex(`it indexes records at or past the end of the commit log (${commitLogEnd})`)
  }
}

/**
 * After a crash of this boot: the end of the last record the dead process dispatched (the largest
 * end among the queues' last units: dispatch writes units in commit-log order) and that record's
 * offset, or null when no queue has a unit or one is damaged (then the scan starts where the
 * checkpoint says). Every record before that end is whole and in the queues.
 */
function dispatchedEnd(queues: ConsumeQueueTable, commitLog: CommitLog): { end: number; lastRecordOffset: number } | null {
  let last: ConsumeQueue | null = null
  for (const queue of queues.all()) {
    if (queue.loadDamage !== null) return null
    if (last === null || queue.getMaxPhysicOffset() > last.getMaxPhysicOffset()) last = queue
  }
  const max = last?.getMaxOffsetInQueue() ?? 0
  const units = last === null || max === 0 ? null : last.getIndexBuffer(max - 1)
  if (last === null || units === null) return null
  try {
    const phy = ConsumeQueue.readOffset(units.buffer, 0)
    const size = ConsumeQueue.readSize(units.buffer, 0)
    if (phy + size !== last.getMaxPhysicOffset() || !isWholeRecord(commitLog, phy, size)) return null
    return { end: phy + size, lastRecordOffset: phy }
  } finally {
    units.release()
  }
}

/**
 * Whether the record the last unit points at is there, whole (CRC checked), where it was written:
 * a store copied while it ran (its queues copied after its log) may miss it, and is then scanned.
 */
function isWholeRecord(commitLog: CommitLog, phy: number, size: number): boolean {
  const found = commitLog.getMessage(phy, size)
  if (found === null) return false
  try {
    const request = checkRecord(found.buffer, 0, size, true)
    return request.status === 'OK' && request.size === size && request.commitLogOffset === phy
  } finally {
    found.release()
  }
}

function minRecoveryTimestamp(host: RecoveryHost): number {
  return host.config.messageIndexEnable && host.config.messageIndexSafe
    ? host.checkpoint.getMinTimestampIndex()
    : host.checkpoint.getMinTimestamp()
}

/** Sets the next queue offset of every queue from its files, and each queue's min offset from the log's. */
export function resetQueueOffsets(commitLog: CommitLog, queues: ConsumeQueueTable): void {
  const table = commitLog.topicQueueTable
  table.clear()
  const minPhy = commitLog.getMinOffset()
  for (const queue of queues.all()) {
    table.set(queue.topic, queue.queueId, queue.getMaxOffsetInQueue())
    queue.correctMinOffset(minPhy)
  }
}

export interface ReplayHost {
  commitLog: CommitLog
  queues: ConsumeQueueTable
  dispatcher: Dispatcher
  targets: DispatchTargets
  /** The index's files, or null when indexing is off. */
  indexFiles: readonly IndexFile[] | null
  /** Derived files were discarded: dispatch the whole log. */
  rebuild: boolean
  /** RecoveryResult.dispatchedTo: the consume queues hold every record before it. */
  dispatchedTo?: number | null
  discardQueue(queue: ConsumeQueue, reason: string): void
}

/** What open's replay read: where it started and how many records it dispatched (a second pass for gaps included). */
export interface ReplayOutcome {
  from: number
  records: number
}

/**
 * The last step of open: dispatches what the derived files miss, from where the plan says, and
 * rebuilds the queues that turn out to miss units in the middle (a lost tail followed by records).
 */
export function replayDerivedFiles(host: ReplayHost): ReplayOutcome {
  const { commitLog, queues, dispatcher, targets } = host
  const minOffset = Math.max(0, commitLog.getMinOffset())
  const files = host.indexFiles
  let indexEnd = files === null ? null : files.length === 0 ? minOffset : files[files.length - 1].getEndPhyOffset()
  // The index's end names the last record it saw; when that is the log's last record, the index
  // needs nothing from the log (a clean open then reads, and maps, no commit-log file). An end of
  // 0 may be a file emptied by a crash's cut (IndexFile.cutInterruptedRecord): one record to replay.
  if (indexEnd !== null && indexEnd > 0 && files !== null && files.length > 0 && indexEnd === commitLog.lastRecordOffset)
    indexEnd = commitLog.getMaxOffset()
  dispatcher.reputFromOffset = reputStart({
    commitLogMinOffset: minOffset,
    queuesMaxPhyOffset: queues.maxPhysicOffset(),
    indexEnd,
    rebuild: host.rebuild,
  })
  // Records the index replays below the clean close's end are in every queue already.
  const from = dispatcher.reputFromOffset
  targets.queuesCompleteTo = host.dispatchedTo ?? -1
  let records = dispatcher.doReput()
  targets.queuesCompleteTo = -1
  if (targets.gapQueues.size > 0) {
    for (const queue of targets.gapQueues) host.discardQueue(queue, 'records of the queue follow units it does not have (a lost tail)')
    targets.gapQueues.clear()
    dispatcher.reputFromOffset = minOffset
    targets.fillGaps = true
    records += dispatcher.doReput()
    targets.fillGaps = false
  }
  targets.opening = false
  resetQueueOffsets(commitLog, queues)
  // Consume-queue files whose units all point below the commit log's first file are
  // unreachable (the cleaner deletes them while running; a store may have been closed before).
  const minPhy = commitLog.getMinOffset()
  if (minPhy > 0) queues.deleteExpiredFiles(minPhy)
  return { from, records }
}
