// Where a dispatched record goes: its consume-queue unit (committed and non-transactional records
// only), its index entries, and a wake-up for the consumers waiting on its queue.
import type { PutMessageResult } from './commitlog/commit-log.js'
import { blankDispatchRequest, SCHEDULE_TOPIC, tagsCodeOf, type DispatchRequest, type PreparedRecord } from './commitlog/record.js'
import { isQueuedRecord } from './commitlog/sys-flag.js'
import type { MessageStoreConfig } from './config.js'
import type { IndexService } from './index/index-service.js'
import type { ConsumeQueue } from './queue/consume-queue.js'
import type { ConsumeQueueTable } from './queue/queue-table.js'
import type { Subscriptions } from './read/subscriptions.js'
import type { ArrivalsFile } from './sharing/arrivals-file.js'
import type { DispatchHandler } from './dispatcher.js'
import type { StoreCheckpoint } from './store-checkpoint.js'

export interface DispatchTargetDeps {
  config: MessageStoreConfig
  queues: ConsumeQueueTable
  /**
   * The index is replaced when open rebuilds it, so it is looked up on each record: through an
   * object rather than a closure, which would be a new call target per store (and send the
   * optimised dispatch of a process's earlier stores back to the compiler).
   */
  index: { readonly current: IndexService }
  checkpoint: StoreCheckpoint
  subscriptions: Subscriptions
  /** Wakes readers in other processes, once per dispatch pass that wrote units. */
  arrivals: Pick<ArrivalsFile, 'arrived'>
  log: (message: string) => void
}

export class DispatchTargets {
  /** True until open() finishes: queues found with missing units are collected for a rebuild. */
  opening = true
  /** Queues whose records follow units they do not have (a lost tail), found while opening. */
  readonly gapQueues = new Set<ConsumeQueue>()
  /**
   * While open replays records for the index, records below this offset are already in their
   * consume queues (a clean close vouches for them): they are not handed to the queues, so the
   * replay does not open every deferred queue only to find each unit there. -1: no such offset.
   */
  queuesCompleteTo = -1
  /**
   * Set for open's second pass, which rebuilds the queues the first found with gaps from the whole
   * log: a gap left then is records the log lost (damage), and the unit is written at its own
   * queue offset after blanks (ConsumeQueue.putMessagePositionInfo), so later offsets stay put.
   */
  fillGaps = false

  constructor(private readonly deps: DispatchTargetDeps) {}

  /**
   * Writes a record's consume-queue unit and index entries; false when the unit could not be
   * written, a promise when the record must wait for its new queue's first file (then retried).
   */
  dispatch(request: DispatchRequest, index = true): boolean | Promise<void> {
    const { config, queues } = this.deps
    const buildIndex = index && config.messageIndexEnable
    if (isQueuedRecord(request.sysFlag) && request.commitLogOffset >= this.queuesCompleteTo) {
      const queue = queues.findOrCreate(request.topic, request.queueId)
      // Made off the JS thread (queue-first-file.ts); open, which cannot wait, makes it in place.
      if (!this.opening && !queue.readOnly && queue.firstFile.needed) return queue.firstFile.prepare(request.queueOffset)
      const max = queue.getMaxOffsetInQueue()
      if (max > 0 && request.queueOffset > max && !this.fillGaps) {
        // The queue is missing units before this record (lost with a consume-queue tail): writing
        // this unit now would put it at the wrong queue offset. Open rebuilds such queues.
        if (this.opening) this.gapQueues.add(queue)
        else this.deps.log(`consume queue ${queue.topic}/${queue.queueId} misses units ${max}..${request.queueOffset - 1}`)
        if (buildIndex) this.deps.index.current.buildIndex(request)
        return true
      }
      if (!queue.putMessagePositionInfo(request.commitLogOffset, request.size, request.tagsCode, request.queueOffset)) {
        // The dispatcher reports why (and puts are refused with it) until a retry gets through.
        if (queue.lastWriteFailure !== null) throw queue.lastWriteFailure
        return false
      }
      this.deps.checkpoint.logicsDispatchedTimestamp = request.storeTimestamp
      if (this.deps.subscriptions.hasWaiters) this.deps.subscriptions.notifyArrival(request.topic, request.queueId)
      this.deps.arrivals.arrived()
    }
    if (!buildIndex) return true
    // The index file this record may need is being made ahead: waited for, as a new queue's first
    // file is (the retry finds its unit written: putMessagePositionInfo skips it).
    const making = this.opening ? null : this.deps.index.current.fileBeingMade()
    if (making !== null) return making
    this.deps.index.current.buildIndex(request)
    return true
  }

  /**
   * Starts making the first file of a new queue that a record dispatch has not reached yet (it
   * waits for an earlier one), so that a batch's new queues are made side by side.
   */
  prepareAhead(record: PreparedRecord, queueOffset: number): void {
    if (this.opening || !isQueuedRecord(record.sysFlag)) return
    const queue = this.deps.queues.findOrCreate(record.topic, record.queueId)
    if (!queue.readOnly && queue.firstFile.needed) void queue.firstFile.prepare(queueOffset)
  }
}

/**
 * The dispatch requests of records a put just appended, built from what the put knows instead of
 * being parsed back out of the log. One request object is refilled for every record: dispatch
 * reads it synchronously and keeps nothing of it.
 */
export class AppendedRequests {
  private readonly request: DispatchRequest = blankDispatchRequest()

  /**
   * The request of `record`, appended as `result` says; null for the schedule topic, whose
   * tagsCode is a delivery time that only the record parser computes. Valid until the next call.
   */
  of(record: PreparedRecord, result: PutMessageResult): DispatchRequest | null {
    return record.topic === SCHEDULE_TOPIC ? null : fillRequest(this.request, record, result)
  }

  /**
   * The same in an object of its own, kept until its record is written (SYNC_FLUSH's write stage):
   * `spare`, one no longer in use, or a new one.
   */
  copyOf(record: PreparedRecord, result: PutMessageResult, spare: DispatchRequest | null = null): DispatchRequest | null {
    return record.topic === SCHEDULE_TOPIC ? null : fillRequest(spare ?? blankDispatchRequest(), record, result)
  }
}

function fillRequest(request: DispatchRequest, record: PreparedRecord, result: PutMessageResult): DispatchRequest {
  request.size = result.wroteBytes
  request.topic = record.topic
  request.queueId = record.queueId
  request.queueOffset = result.queueOffset
  request.commitLogOffset = result.wroteOffset
  request.sysFlag = record.sysFlag
  request.bornTimestamp = record.bornTimestamp
  request.storeTimestamp = result.storeTimestamp
  request.preparedTransactionOffset = record.preparedTransactionOffset
  request.tagsCode = tagsCodeOf(record.tags)
  request.keys = record.keys
  request.uniqKey = record.uniqKey
  request.bodyCRC = record.bodyCRC
  return request
}

/**
 * Where the dispatcher sends each record: its queue unit and index entries (with its due time
 * when the delay levels are not the default ones), then the compacted topics' key table. A class
 * rather than a closure: a closure is a new call target per store, and code the JIT optimised
 * for one store would go back to the compiler when the next store of the process dispatches.
 */
export class RecordDispatch implements DispatchHandler {
  constructor(
    private readonly targets: DispatchTargets,
    private readonly dueTimes: ((request: DispatchRequest) => DispatchRequest) | null,
    private readonly compacted: { dispatch(request: DispatchRequest): boolean },
  ) {}

  dispatch(request: DispatchRequest): boolean | Promise<void> {
    const done = this.targets.dispatch(this.dueTimes === null ? request : this.dueTimes(request))
    return done === true ? this.compacted.dispatch(request) : done
  }
}
