// consume() over every queue of a topic: one single-queue subscription per queue, merged. Each
// queue keeps its own offset (committed per queue, as RocketMQ's consumers do); messages of one
// queue come in order, queues interleave as their messages arrive. A waiting queue costs nothing:
// its subscription sleeps until dispatch wakes it.
import type { CommitOptions, MessageExt, Subscription, TopicSubscription } from '../types.js'

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
export function mergeQueueSubscriptions(subscriptions: ReadonlyMap<number, Subscription>, options: MergeOptions): TopicSubscription {
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
      const iterators = entries.map(([, sub]) => sub[Symbol.asyncIterator]())
      const count = iterators.length
      // The pending next() of each queue; a queue whose iteration ended has none.
      const pending = new Map<number, Promise<{ index: number; result: IteratorResult<MessageExt> }>>()
      const ask = (index: number) =>
        pending.set(
          index,
          iterators[index].next().then((result) => ({ index, result })),
        )
      iterators.forEach((_, index) => ask(index))
      // Which queue goes first among those already resolved: rotated so that no queue starves another.
      let turn = 0
      return {
        async next(): Promise<IteratorResult<MessageExt>> {
          while (pending.size > 0) {
            const order = [...pending.keys()].sort((a, b) => ((a - turn + count) % count) - ((b - turn + count) % count))
            const { index, result } = await Promise.race(order.map((i) => pending.get(i)!))
            turn = (index + 1) % count
            if (result.done === true) {
              pending.delete(index)
              continue
            }
            ask(index)
            const queueId = entries[index][0]
            const position = result.value.queueOffset + 1
            positions.set(queueId, position)
            options.onHandOut?.(queueId, position)
            return result
          }
          return { value: undefined, done: true }
        },
        async return(): Promise<IteratorResult<MessageExt>> {
          options.stop.abort()
          pending.clear()
          await Promise.all(iterators.map((it) => it.return?.()))
          return { value: undefined, done: true }
        },
      }
    },
  }
}
