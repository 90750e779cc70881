// Consumer retries and the dead-letter queue, RocketMQ's way (its broker's CONSUMER_SEND_MSG_BACK):
// a message a consumer failed goes to %RETRY%<group> with a delay level (so through the schedule
// topic), or to %DLQ%<group> once it was consumed maxReconsumeTimes times. This module builds
// that message from the stored record; retry-subscription.ts runs it for a subscription.
import { createMsgId, PropertyName } from '../commitlog/record.js'
import { storedCopy } from '../schedule/stored-copy.js'
import type { Message, MessageExt } from '../types.js'

export const RETRY_TOPIC_PREFIX = '%RETRY%'
export const DLQ_TOPIC_PREFIX = '%DLQ%'
/** RocketMQ's retryMaxTimes default: the 17th failure goes to the dead-letter queue. */
export const DEFAULT_MAX_RECONSUME_TIMES = 16
/** RocketMQ's retryQueueNums and DLQ_NUMS_PER_GROUP: one queue each, queue 0. */
export const RETRY_QUEUE_ID = 0
export const DLQ_QUEUE_ID = 0

/** Property names of the send-back (RocketMQ's MessageConst). */
export const RetryProperty = {
  RETRY_TOPIC: 'RETRY_TOPIC',
  ORIGIN_MESSAGE_ID: 'ORIGIN_MESSAGE_ID',
} as const

export function retryTopicOf(group: string): string {
  return RETRY_TOPIC_PREFIX + group
}

export function dlqTopicOf(group: string): string {
  return DLQ_TOPIC_PREFIX + group
}

/** The first level of a retry: level 3 + reconsume count (10 s, 30 s, 1 min, ...). */
const FIRST_RETRY_LEVEL = 3

/**
 * The message a send-back puts for `record` (as stored: its topic is where it was read, the retry
 * topic for a message already retried): to the retry topic with DELAY = `delayLevel` (0 or absent:
 * 3 + reconsume count), or to the DLQ with DELAY = 0 once the count reached `maxReconsumeTimes` or
 * when `delayLevel` is negative. Body, flag, sysFlag, born time and host are the record's, the
 * reconsume count goes up by one, and the properties are all the record's plus RETRY_TOPIC (the
 * first topic, kept from the first retry), ORIGIN_MESSAGE_ID (the first record's offset msgId),
 * WAIT=false and DELAY.
 */
export function sendBackMessage(record: MessageExt, group: string, maxReconsumeTimes: number, delayLevel: number): Message {
  const reconsumeTimes = record.reconsumeTimes
  const toDlq = reconsumeTimes >= maxReconsumeTimes || delayLevel < 0
  const properties: Record<string, string> = { ...record.properties }
  properties[RetryProperty.RETRY_TOPIC] ??= record.topic
  properties[RetryProperty.ORIGIN_MESSAGE_ID] ??= createMsgId(record.storeHost, record.commitLogOffset)
  properties[PropertyName.WAIT] = 'false'
  properties[PropertyName.DELAY] = String(toDlq ? 0 : delayLevel > 0 ? delayLevel : FIRST_RETRY_LEVEL + reconsumeTimes)
  const topic = toDlq ? dlqTopicOf(group) : retryTopicOf(group)
  return storedCopy(record, topic, toDlq ? DLQ_QUEUE_ID : RETRY_QUEUE_ID, properties, reconsumeTimes + 1)
}
