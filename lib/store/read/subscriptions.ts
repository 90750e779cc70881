// Subscriptions: consume() tails a queue, and dispatch wakes the consumers waiting on a queue when
// a message arrives for it (no polling).
import type { ConsumerOffsets } from '../consumer-offsets.js'
import type { CommitOptions, ConsumeOptions, MessageExt, Subscription } from '../types.js'
import type { ReadService } from './read-service.js'

export interface SubscriptionDeps {
  /** Reads of a queue; `bounds` gives a queue's offsets when they do not come from its consume queue (compacted topics). */
  read: Pick<ReadService, 'readQueue'> & { bounds?: (topic: string, queueId: number) => { min: number; max: number } | null }
  /** A queue's offsets when `read.bounds` gives none (the store's consume queues). */
  queues: { find(topic: string, queueId: number): { getMinOffsetInQueue(): number; getMaxOffsetInQueue(): number } | null }
  offsets: ConsumerOffsets
  /** Dispatches what the log holds beyond the consume queues, so a read sees every put. */
  catchUp: () => void
  isClosed: () => boolean
  /** Commits through the store's checks (subscription.commit()); resolves as the options say. */
  commit: (group: string, topic: string, queueId: number, offset: number, options: CommitOptions) => Promise<void>
  /** Told when a consumer starts waiting (a read-only opener then watches the queue's end). */
  onWait?: () => void
}

/**
 * The iterator of a queue subscription. takeSync hands out the next message of the batch already
 * read, or undefined when there is none to hand out without waiting (the batch is spent, a read is
 * in flight, the iteration ended): the topic merge takes from a queue without a promise per
 * message. Internal; consumers see an AsyncIterator.
 */
export interface QueueIterator extends AsyncIterator<MessageExt> {
  takeSync(): MessageExt | undefined
}

export class Subscriptions {
  private readonly waiters = new Map<string, Set<() => void>>()

  constructor(private readonly deps: SubscriptionDeps) {}

  /** True while some consumer waits; dispatch skips notifying otherwise. */
  get hasWaiters(): boolean {
    return this.waiters.size > 0
  }

  /** The queues consumers wait on, as [topic, queueId]. */
  *waitedQueues(): IterableIterator<[string, number]> {
    for (const key of this.waiters.keys()) {
      const dash = key.lastIndexOf('-')
      yield [key.slice(0, dash), Number(key.slice(dash + 1))]
    }
  }

  /** Wakes the consumers waiting on a queue. */
  notifyArrival(topic: string, queueId: number): void {
    const key = `${topic}-${queueId}`
    const set = this.waiters.get(key)
    if (set === undefined) return
    this.waiters.delete(key)
    for (const wake of set) wake()
  }

  /** Wakes every waiting consumer (close); their iterations then end. */
  wakeAll(): void {
    for (const set of this.waiters.values()) for (const wake of set) wake()
    this.waiters.clear()
  }

  /** A subscription over one queue; options are already checked except `from`. */
  subscribe(options: ConsumeOptions & { queueId: number }, batchSize: number, tags: string[] | undefined): Subscription {
    const { group, topic, queueId, signal } = options
    const deps = this.deps
    const stopped = () => deps.isClosed() || signal?.aborted === true
    let position = this.startOffset(group, topic, queueId, options.from ?? 'committed')
    const waitForArrival = () => this.waitForArrival(topic, queueId, signal)
    return {
      get position() {
        return position
      },
      commit(offset?: number, commitOptions: CommitOptions = { durable: true }) {
        return deps.commit(group, topic, queueId, offset ?? position, commitOptions)
      },
      [Symbol.asyncIterator](): QueueIterator {
        // A hand-written iterator rather than an async generator: a message already read hands
        // out through one resolved promise, without the generator's resume machinery (that
        // machinery cost as much as reading the message). `for await` awaits whatever next()
        // returns (a plain object too), so that one settled promise per message is the floor of
        // an AsyncIterator; takeSync (the topic merge) has none.
        let batch: readonly MessageExt[] = []
        let index = 0
        let nextBeginOffset = position
        let done = false
        /** A read in progress: a next() called before it settles waits for it, as with a generator. */
        let filling: Promise<IteratorResult<MessageExt>> | null = null
        const finish = (): IteratorResult<MessageExt> => {
          done = true
          batch = []
          return { value: undefined, done: true }
        }
        const handOut = (): IteratorResult<MessageExt> => {
          const message = batch[index++]
          position = message.queueOffset + 1
          if (options.autoCommit === true) deps.offsets.commitOffset(group, topic, queueId, position)
          return { value: message, done: false }
        }
        const fill = async (): Promise<IteratorResult<MessageExt>> => {
          for (;;) {
            if (stopped()) return finish()
            deps.catchUp()
            // Not a pull: the read takes the subscription's batch size (see ReadService.readQueue).
            const result = deps.read.readQueue(topic, queueId, position, batchSize, tags, false)
            if (result.status === 'FOUND') {
              batch = result.messages
              index = 0
              nextBeginOffset = result.nextBeginOffset
              return handOut()
            }
            if (result.nextBeginOffset !== position && result.status !== 'NO_MESSAGE_IN_QUEUE') {
              position = result.nextBeginOffset
              continue
            }
            await waitForArrival()
          }
        }
        const iterator: QueueIterator = {
          takeSync(): MessageExt | undefined {
            if (filling !== null || done || index >= batch.length || stopped()) return undefined
            return handOut().value as MessageExt
          },
          next(): Promise<IteratorResult<MessageExt>> {
            if (filling !== null) return filling.then(() => iterator.next())
            if (done || stopped()) return Promise.resolve(finish())
            if (index < batch.length) return Promise.resolve(handOut())
            // The batch is used up: continue after the units it covered (filtered ones included).
            if (batch.length > 0) {
              position = Math.max(position, nextBeginOffset)
              batch = []
              index = 0
            }
            const pending = fill().finally(() => {
              filling = null
            })
            filling = pending
            return pending
          },
          return(): Promise<IteratorResult<MessageExt>> {
            return Promise.resolve(finish())
          },
        }
        return iterator
      },
    }
  }

  private startOffset(group: string, topic: string, queueId: number, from: NonNullable<ConsumeOptions['from']>): number {
    this.deps.catchUp()
    const queue = this.deps.queues.find(topic, queueId)
    const bounds = this.deps.read.bounds?.(topic, queueId) ?? null
    const min = bounds?.min ?? queue?.getMinOffsetInQueue() ?? 0
    const max = bounds?.max ?? queue?.getMaxOffsetInQueue() ?? 0
    if (typeof from === 'number') {
      if (!Number.isSafeInteger(from) || from < 0) throw new RangeError('from must be a non-negative integer')
      return from
    }
    if (from === 'earliest') return min
    if (from === 'latest') return max
    if (from !== 'committed') throw new TypeError(`from must be 'committed', 'earliest', 'latest' or an offset`)
    const committed = this.deps.offsets.queryOffset(group, topic, queueId)
    return committed >= 0 ? committed : min
  }

  private waitForArrival(topic: string, queueId: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      if (this.deps.isClosed() || signal?.aborted === true) return resolve()
      const key = `${topic}-${queueId}`
      let set = this.waiters.get(key)
      if (set === undefined) {
        set = new Set()
        this.waiters.set(key, set)
      }
      const wake = () => {
        signal?.removeEventListener('abort', onAbort)
        resolve()
      }
      const onAbort = () => {
        this.waiters.get(key)?.delete(wake)
        resolve()
      }
      set.add(wake)
      signal?.addEventListener('abort', onAbort, { once: true })
      this.deps.onWait?.()
    })
  }
}
