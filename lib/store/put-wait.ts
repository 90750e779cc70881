// What a put waits for once its records are appended: SYNC_FLUSH's flush of them, SYNC_MASTER's
// slave, and a new queue's first file that dispatch waits for. The common wait, a flush and
// nothing else, is answered by the flusher calling the put back: one object and one promise per
// put, since a stream of single puts each waiting for its group commit is mostly allocation
// otherwise (an async frame per put, and one per await in it).
import type { PutMessageResult, PutMessageStatus } from './commitlog/commit-log.js'
import { type FlushWaiter, markUnflushed } from './flusher.js'
import { markUnreplicated } from './ha/ha-service.js'
import type { StoreEngine } from './store-engine.js'

/** What one put appended (see MessageStore.appendAll). */
export interface PutTally {
  appended: number
  bytes: number
  lastEnd: number
  waitForFlush: boolean
  /** Some record was left to the dispatcher's pass over the log (not dispatched from what the put knew). */
  leftToDispatch: boolean
}

type PutAnswer = PutMessageResult | PutMessageResult[]

/** The waits of a put that appended records and waits for them (tally.waitForFlush). */
export function waitForPut(
  e: StoreEngine,
  results: PutMessageResult[],
  tally: PutTally,
  began: number,
  single: boolean,
  /** The put calls this one answers (single puts gathered into one batch: coalesced-puts.ts). */
  requests = 1,
): Promise<PutAnswer> {
  const put = new PendingPut(e, results, tally, began, single, requests)
  if (e.config.flushDiskType !== 'SYNC_FLUSH' || e.ha.role === 'SYNC_MASTER') return put.waitInTurn()
  opening = put
  const answer = new Promise<PutAnswer>(adoptSettlers)
  opening = null
  e.flusher.waitFlush(tally.lastEnd, put)
  return answer
}

/**
 * The put whose promise is being made: its executor runs synchronously inside the constructor,
 * so it reaches the put through this instead of a closure per put.
 */
let opening: PendingPut | null = null

function adoptSettlers(resolve: (answer: PutAnswer) => void, reject: (error: unknown) => void): void {
  const put = opening as PendingPut
  put.resolve = resolve
  put.reject = reject
}

function ignore(): void {}

/** A put whose records are appended, waiting for what makes it answerable. */
class PendingPut implements FlushWaiter {
  resolve: (answer: PutAnswer) => void = ignore
  reject: (error: unknown) => void = ignore

  constructor(
    private readonly e: StoreEngine,
    private readonly results: PutMessageResult[],
    private readonly tally: PutTally,
    private readonly began: number,
    private readonly single: boolean,
    readonly requests: number,
  ) {}

  /**
   * SYNC_FLUSH without a slave to wait for: the flusher's answer completes the put. Called by the
   * flusher, which must not see a throw (it answers a whole group in a loop).
   */
  flushed(status: PutMessageStatus): void {
    const { e, results } = this
    try {
      if (status !== 'PUT_OK') markFlushFailed(e, results, status)
      e.ha.notifyAppended()
      e.statsService.recordPut(this.tally.appended, this.tally.bytes, Date.now() - this.began)
      const answer = this.single ? results[0] : results
      if (e.dispatcher.waiting === null) this.resolve(answer)
      else e.dispatcher.settle().then(() => this.resolve(answer), this.reject)
    } catch (error) {
      this.reject(error)
    }
  }

  /** Every other wait, one after the other: the flush (or a flush loop's wake-up), then the slave. */
  async waitInTurn(): Promise<PutAnswer> {
    const { e, results, tally } = this
    if (e.config.flushDiskType === 'SYNC_FLUSH') {
      const status = await e.flusher.awaitFlush(tally.lastEnd, this.requests)
      if (status !== 'PUT_OK') markFlushFailed(e, results, status)
    } else {
      e.flusher.wakeup()
    }
    e.ha.notifyAppended()
    // SYNC_MASTER: one wait for the batch's end, once it is flushed as flushDiskType says.
    if (e.ha.role === 'SYNC_MASTER') {
      const status = await e.ha.awaitSlave(tally.lastEnd)
      if (status !== 'PUT_OK') markUnreplicated(results, status, e.config.syncFlushTimeout)
    }
    e.statsService.recordPut(tally.appended, tally.bytes, Date.now() - this.began)
    if (e.dispatcher.waiting !== null) await e.dispatcher.settle()
    return this.single ? results[0] : results
  }
}

function markFlushFailed(e: StoreEngine, results: PutMessageResult[], status: PutMessageStatus): void {
  const failedSync = e.flags.list().find((flag) => flag.name === 'NOT_WRITEABLE')?.reason ?? null
  markUnflushed(results, status, e.config.syncFlushTimeout, failedSync)
}
