// Delay levels (RocketMQ 4.9): the rewrite of a delayed put into
// SCHEDULE_TOPIC_XXXX queue level − 1 with REAL_TOPIC / REAL_QID, as RocketMQ's commit log does it
// before appending. The schedule service (schedule-service.ts) later puts the message back.
import { randomBytes } from 'node:crypto'

import { type DispatchRequest, PropertyName, SCHEDULE_TOPIC } from '../commitlog/record.js'
import { isQueuedRecord } from '../commitlog/sys-flag.js'
import { asksForTimer, timedMessage } from '../timer/timer-messages.js'
import type { Message } from '../types.js'
import type { DelayLevels } from './delay-level-table.js'

export { DelayLevels, parseMessageDelayLevel } from './delay-level-table.js'

/** Fields of a message that ask for a later delivery. */
interface DelayFields {
  delayTimeLevel?: unknown
  deliverAt?: unknown
  delayMs?: unknown
}

/** Whether `message` asks for a delay at all: the one test every put pays, kept to field reads. */
export function asksForDelay(message: Message): boolean {
  const fields = message as DelayFields
  return (
    fields.delayTimeLevel !== undefined ||
    fields.deliverAt !== undefined ||
    fields.delayMs !== undefined ||
    (message.properties !== undefined && message.properties !== null && message.properties.DELAY !== undefined) ||
    asksForTimer(message)
  )
}

/** What a timed put needs: the store's clock and `timerPrecisionMs`. */
export interface TimerSettings {
  now(): number
  precisionMs: number
}

/** Why a delayed message cannot be stored (MESSAGE_ILLEGAL). */
export interface DelayRefusal {
  readonly reason: string
}

export function isDelayRefusal(value: Message | DelayRefusal): value is DelayRefusal {
  return (value as DelayRefusal).reason !== undefined && (value as Message).topic === undefined
}

/**
 * The message to append for a delayed put (asksForDelay was true): moved to the schedule topic
 * with its level clamped to the table, REAL_TOPIC / REAL_QID and DELAY set; the message itself
 * when no delay applies (level 0, or a transactional prepared / rollback record, which RocketMQ
 * never delays); a refusal for bad input. `delayTimeLevel` wins over a DELAY property, as the
 * message's tags and keys win over TAGS and KEYS. A message without UNIQ_KEY gets one, so that a
 * copy delivered twice (at least once, after a crash) carries the same client id.
 */
export function delayedMessage(message: Message, levels: DelayLevels, timer?: TimerSettings): Message | DelayRefusal {
  const fields = message as DelayFields
  const timed = asksForTimer(message)
  if (fields.deliverAt !== undefined && (typeof fields.deliverAt !== 'number' || !Number.isFinite(fields.deliverAt))) {
    return { reason: `deliverAt must be a finite number of epoch milliseconds, got ${String(fields.deliverAt)}` }
  }
  if (fields.delayMs !== undefined && (typeof fields.delayMs !== 'number' || !Number.isFinite(fields.delayMs))) {
    return { reason: `delayMs must be a finite number of milliseconds, got ${String(fields.delayMs)}` }
  }
  const property = message.properties?.DELAY
  const hasLevel = fields.delayTimeLevel !== undefined || property !== undefined
  if (timed && hasLevel) {
    return { reason: 'a message takes a delay level or a delivery time (deliverAt / delayMs / a TIMER_* property), not both' }
  }
  if (timed) {
    if (timer === undefined) return { reason: 'this store takes no delivery times (deliverAt / delayMs)' }
    return timedMessage(message, timer.now(), timer.precisionMs, newUniqKey)
  }
  let level: number
  if (fields.delayTimeLevel !== undefined) {
    level = fields.delayTimeLevel as number
    if (typeof level !== 'number' || !Number.isSafeInteger(level) || level < 0) {
      return { reason: `delayTimeLevel must be a non-negative integer, got ${String(fields.delayTimeLevel)}` }
    }
  } else {
    if (typeof property !== 'string' || !/^-?\d{1,10}$/.test(property)) {
      return { reason: `the DELAY property must be a delay level (an integer), got ${JSON.stringify(property)}` }
    }
    level = Number(property)
    if (level < 0) return { reason: `the DELAY property must not be negative, got ${property}` }
  }
  // RocketMQ delays ordinary and committed messages only: a transaction half is stored as sent.
  if (level === 0 || !isQueuedRecord(typeof message.sysFlag === 'number' ? message.sysFlag : 0)) return message
  if (level > levels.maxLevel) level = levels.maxLevel
  const properties: Record<string, string> = { ...message.properties }
  properties[PropertyName.DELAY] = String(level)
  properties[PropertyName.REAL_TOPIC] = message.topic
  properties[PropertyName.REAL_QID] = String(message.queueId ?? 0)
  if (properties[PropertyName.UNIQ_KEY] === undefined || properties[PropertyName.UNIQ_KEY] === '') {
    properties[PropertyName.UNIQ_KEY] = newUniqKey()
  }
  const { delayTimeLevel: _level, ...rest } = message as Message & DelayFields
  return { ...rest, topic: SCHEDULE_TOPIC, queueId: level - 1, properties }
}

let uniqCounter = 0
const uniqPrefix = randomBytes(8).toString('hex').toUpperCase()

/**
 * A client message id of RocketMQ's length (32 upper-case hex digits): a per-process random
 * prefix, the time in ms and a counter, so ids made by one process never repeat.
 */
export function newUniqKey(now = Date.now()): string {
  uniqCounter = (uniqCounter + 1) & 0xffff
  const time = Math.floor(now % 2 ** 48)
    .toString(16)
    .padStart(12, '0')
  return `${uniqPrefix}${time}${uniqCounter.toString(16).padStart(4, '0')}`.toUpperCase()
}

/**
 * What dispatch applies to each record for a store's levels: the record parser computes a schedule
 * unit's due time (its tagsCode) with RocketMQ's default levels, so other levels recompute it from
 * the store time and the unit's queue (level − 1). Nothing to do for the default levels.
 */
export function dueTimeCorrection(levels: DelayLevels): (request: DispatchRequest) => DispatchRequest {
  if (levels.isDefault) return (request) => request
  return (request) => {
    if (request.topic === SCHEDULE_TOPIC && request.queueId < levels.maxLevel) {
      request.tagsCode = request.storeTimestamp + levels.delayOf(request.queueId + 1)
    }
    return request
  }
}
