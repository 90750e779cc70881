// A topic subscription with its group's retries: it reads %RETRY%<group> beside the topic's queues
// (retried messages are handed out with their original topic, as RocketMQ's consumer resets it),
// nack() sends a message back (retry-topics.ts), and commit() covers both, after the nacks are on
// disk, so that a committed offset never passes a failed message whose retry could still be lost.
import { MQStoreError } from '../../errors.js'
import type { PutMessageResult, PutMessageStatus } from '../commitlog/commit-log.js'
import type { QueueIterator } from '../read/subscriptions.js'
import { mergeQueueSubscriptions, type MergeOptions } from '../read/topic-subscription.js'
import type { CommitOptions, Message, MessageExt, NackOptions, Subscription, TopicSubscription } from '../types.js'
import { dlqTopicOf, RetryProperty, sendBackMessage } from './retry-topics.js'

/** The key of the retry queue among the merged queue subscriptions (never a real queue id). */
export const RETRY_SLOT = -1

export interface RetryDeps {
  group: string
  maxReconsumeTimes: number
  /** The stored record at a commit-log offset (the send-back reads it, as RocketMQ's broker does). */
  lookMessage(commitLogOffset: number): MessageExt | null
  put(message: Message): Promise<PutMessageResult>
  /** Counts a nack stored (stats().retry). */
  onNack(deadLettered: boolean): void
  /** Resolves once the commit log is flushed up to `offset`. */
  awaitFlush(offset: number): Promise<PutMessageStatus>
}

/**
 * Merges the topic's queue subscriptions and, when given, the retry queue's (keyed RETRY_SLOT),
 * and adds nack() and a commit() that covers both. `positions` shows the topic's queues only.
 */
export function subscribeWithRetries(
  queues: ReadonlyMap<number, Subscription>,
  retry: Subscription | null,
  options: MergeOptions,
  deps: RetryDeps,
): TopicSubscription {
  const all = new Map(queues)
  if (retry !== null) all.set(RETRY_SLOT, retriedAsOriginal(retry))
  const merged = mergeQueueSubscriptions(all, options)
  const retryStart = retry?.position ?? 0
  /** Where the last nack's record ends: commit() waits until the log is flushed that far. */
  let nackedTo = 0
  return {
    get positions(): ReadonlyMap<number, number> {
      const positions = new Map(merged.positions)
      positions.delete(RETRY_SLOT)
      return positions
    },
    async commit(commitOptions?: CommitOptions): Promise<void> {
      const durable = commitOptions?.durable !== false
      if (durable && nackedTo > 0) {
        const status = await deps.awaitFlush(nackedTo)
        if (status !== 'PUT_OK')
          throw new MQStoreError('IO_ERROR', `the nacked messages could not be flushed (${status}); nothing committed`)
      }
      const positions = merged.positions
      const commits: Promise<void>[] = []
      for (const [queueId, sub] of queues) commits.push(sub.commit(positions.get(queueId), commitOptions))
      // The retry queue's offset is committed once something was read from it.
      const retryPosition = positions.get(RETRY_SLOT)
      if (retry !== null && retryPosition !== undefined && retryPosition !== retryStart)
        commits.push(retry.commit(retryPosition, commitOptions))
      await Promise.all(commits)
    },
    async nack(message: MessageExt, nackOptions?: NackOptions): Promise<PutMessageResult> {
      if (message === null || typeof message !== 'object' || !Number.isSafeInteger(message.commitLogOffset)) {
        throw new TypeError('nack takes a message handed out by this subscription')
      }
      const delayLevel = nackOptions?.delayLevel ?? 0
      if (!Number.isSafeInteger(delayLevel)) throw new RangeError(`delayLevel must be an integer, got ${String(delayLevel)}`)
      const record = deps.lookMessage(message.commitLogOffset)
      if (record === null) {
        throw new MQStoreError('CORRUPTION', `nack: no readable record at commit-log offset ${message.commitLogOffset}`)
      }
      const sent = sendBackMessage(record, deps.group, deps.maxReconsumeTimes, delayLevel)
      const result = await deps.put(sent)
      if (result.status !== 'PUT_OK') {
        const code = result.status === 'CREATE_MAPEDFILE_FAILED' ? 'NO_SPACE' : 'IO_ERROR'
        throw new MQStoreError(
          code,
          `nack: the send-back was refused with ${result.status}${result.reason === undefined ? '' : `: ${result.reason}`}`,
        )
      }
      nackedTo = Math.max(nackedTo, result.wroteOffset + result.wroteBytes)
      deps.onNack(sent.topic === dlqTopicOf(deps.group))
      return result
    },
    [Symbol.asyncIterator]: () => merged[Symbol.asyncIterator](),
  }
}

/**
 * The retry queue's subscription with each message handed out under its original topic
 * (RETRY_TOPIC); queue offsets stay the retry queue's, which is what positions track.
 */
function retriedAsOriginal(retry: Subscription): Subscription {
  const original = (m: MessageExt): MessageExt => {
    const topic = m.properties[RetryProperty.RETRY_TOPIC]
    if (topic === undefined) return m
    // Field by field: a stored message reads its fields lazily from the record (no own properties).
    return {
      topic,
      queueId: m.queueId,
      queueOffset: m.queueOffset,
      commitLogOffset: m.commitLogOffset,
      storeSize: m.storeSize,
      body: m.body,
      tags: m.tags,
      keys: m.keys,
      properties: m.properties,
      storeTimestamp: m.storeTimestamp,
      bornTimestamp: m.bornTimestamp,
      bornHost: m.bornHost,
      storeHost: m.storeHost,
      msgId: m.msgId,
      sysFlag: m.sysFlag,
      reconsumeTimes: m.reconsumeTimes,
      bodyCRC: m.bodyCRC,
      flag: m.flag,
      preparedTransactionOffset: m.preparedTransactionOffset,
    }
  }
  return {
    get position() {
      return retry.position
    },
    commit: (offset, options) => retry.commit(offset, options),
    [Symbol.asyncIterator](): QueueIterator {
      const inner = retry[Symbol.asyncIterator]() as QueueIterator
      return {
        takeSync() {
          const message = inner.takeSync()
          return message === undefined ? undefined : original(message)
        },
        async next() {
          const result = await inner.next()
          return result.done === true ? result : { value: original(result.value), done: false }
        },
        return: () => inner.return?.() ?? Promise.resolve({ value: undefined, done: true }),
      }
    },
  }
}
