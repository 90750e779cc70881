// consume() over every queue of a topic: one single-queue subscription per queue, merged. Each
// queue keeps its own offset (committed per queue, as RocketMQ's consumers do); messages of one
// queue come in order, queues interleave as their messages arrive. A waiting queue costs nothing:
// its subscription sleeps until dispatch wakes it.
import type { CommitOptions, MessageExt, Subscription, TopicSubscription } from '../types.js'
import type { QueueIterator } from './subscriptions.js'

export interface MergeOptions {
  /** Ends the waits of the queue subscriptions when the merged iteration ends. */
  stop: AbortController
  /** Called for each message handed out, with the queue's offset after it (autoCommit). */
  onHandOut?: (queueId: number, position: number) => void
}

/**
 * Merges `subscriptions` (one per queue id) into one. The queue subscriptions read ahead (one
 * message each), so positions are tracked here, from what was handed out: a commit never covers a
 * message the consumer has not been given.
 */
export function mergeQueueSubscriptions(
  subscriptions: ReadonlyMap<number, Subscription>,
  options: MergeOptions,
): Omit<TopicSubscription, 'nack'> {
  const entries = [...subscriptions]
  const positions = new Map(entries.map(([queueId, sub]) => [queueId, sub.position]))
  return {
    get positions(): ReadonlyMap<number, number> {
      return new Map(positions)
    },
    async commit(commitOptions?: CommitOptions): Promise<void> {
      await Promise.all(entries.map(([queueId, sub]) => sub.commit(positions.get(queueId), commitOptions)))
    },
    [Symbol.asyncIterator](): AsyncIterator<MessageExt> {
      const iterators = entries.map(([, sub]) => sub[Symbol.asyncIterator]() as AsyncIterator<MessageExt> & Partial<QueueIterator>)
      const count = iterators.length
      // Per queue: a next() in flight, its result once settled (not yet handed out), and whether
      // the queue's iteration ended. A queue with neither is taken from synchronously (takeSync):
      // messages of a batch already read cost no promise each.
      const asked = new Array<boolean>(count).fill(false)
      const ready = new Array<IteratorResult<MessageExt> | null>(count).fill(null)
      const ended = new Array<boolean>(count).fill(false)
      let live = count
      /** Wakes a next() waiting for some queue's next() to settle. */
      let wake: (() => void) | null = null
      const ask = (index: number) => {
        asked[index] = true
        iterators[index].next().then(
          (result) => {
            asked[index] = false
            ready[index] = result
            wake?.()
          },
          (error: unknown) => {
            asked[index] = false
            ready[index] = { value: undefined, done: true }
            failure ??= { error }
            wake?.()
          },
        )
      }
      let failure: { error: unknown } | null = null
      // Which queue goes first: rotated past the last one handed out, so that no queue starves another.
      let turn = 0
      const handOut = (index: number, message: MessageExt): IteratorResult<MessageExt> => {
        turn = (index + 1) % count
        const queueId = entries[index][0]
        const position = message.queueOffset + 1
        positions.set(queueId, position)
        options.onHandOut?.(queueId, position)
        return { value: message, done: false }
      }
      /** A message available now (settled or buffered), in turn order; null when none is. */
      const takeNow = (): IteratorResult<MessageExt> | null => {
        for (let n = 0; n < count; n++) {
          const index = (turn + n) % count
          if (ended[index]) continue
          const settled = ready[index]
          if (settled !== null) {
            ready[index] = null
            if (settled.done === true) {
              ended[index] = true
              live--
              continue
            }
            return handOut(index, settled.value)
          }
          if (!asked[index]) {
            const message = iterators[index].takeSync?.()
            if (message !== undefined) return handOut(index, message)
          }
        }
        return null
      }
      const wait = async (): Promise<IteratorResult<MessageExt>> => {
        for (;;) {
          const now = takeNow()
          if (now !== null) return now
          if (failure !== null) throw failure.error
          if (live === 0) return { value: undefined, done: true }
          for (let index = 0; index < count; index++) if (!ended[index] && !asked[index] && ready[index] === null) ask(index)
          await new Promise<void>((resolve) => {
            wake = resolve
          })
          wake = null
        }
      }
      /** A next() that had to wait: a next() called before it settles waits its turn. */
      let waiting: Promise<IteratorResult<MessageExt>> | null = null
      const iterator: AsyncIterator<MessageExt> = {
        next(): Promise<IteratorResult<MessageExt>> {
          if (waiting !== null) return waiting.then(() => iterator.next())
          const now = takeNow()
          if (now !== null) return Promise.resolve(now)
          const pending = wait().finally(() => {
            waiting = null
          })
          waiting = pending
          return pending
        },
        async return(): Promise<IteratorResult<MessageExt>> {
          options.stop.abort()
          live = 0
          ended.fill(true)
          await Promise.all(iterators.map((it) => it.return?.()))
          return { value: undefined, done: true }
        },
      }
      return iterator
    },
  }
}
