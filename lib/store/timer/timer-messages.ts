// Any delivery time (RocketMQ 5's timer messages): the put rewrite of a message with `deliverAt` /
// `delayMs` or a producer timer property into the internal topic rmq_sys_wheel_timer, queue 0, with
// TIMER_OUT_MS (the rounded slot time) and REAL_TOPIC / REAL_QID, as RocketMQ 5's put hook does.
// The timer service (timer-service.ts) enqueues such records into the wheel and puts them back.
import { PropertyName, parseMsgId } from '../commitlog/record.js'
import { isQueuedRecord } from '../commitlog/sys-flag.js'
import { storedCopy } from '../schedule/stored-copy.js'
import { ConsumeQueue } from '../queue/consume-queue.js'
import type { Message, MessageExt } from '../types.js'

export const TIMER_TOPIC = 'rmq_sys_wheel_timer'
/** How far ahead a delivery time may be: 7 days (RocketMQ 5's default is 3). */
export const TIMER_HORIZON_MS = 7 * 86_400_000
/** The precisions a store accepts (`timerPrecisionMs`). */
export const TIMER_PRECISIONS: readonly number[] = [100, 1000]

/** RocketMQ 5's timer property names. */
export const TimerProperty = {
  DELIVER_MS: 'TIMER_DELIVER_MS',
  DELAY_MS: 'TIMER_DELAY_MS',
  DELAY_SEC: 'TIMER_DELAY_SEC',
  OUT_MS: 'TIMER_OUT_MS',
  DEL_UNIQKEY: 'TIMER_DEL_UNIQKEY',
  ENQUEUE_MS: 'TIMER_ENQUEUE_MS',
  DEQUEUE_MS: 'TIMER_DEQUEUE_MS',
} as const

/** Properties a delivered message loses: a re-put of it (a retry, say) must not be timed again. */
export const CLEARED_AT_DELIVERY: readonly string[] = [
  TimerProperty.DELIVER_MS,
  TimerProperty.DELAY_MS,
  TimerProperty.DELAY_SEC,
  TimerProperty.OUT_MS,
  TimerProperty.DEL_UNIQKEY,
]

interface TimerFields {
  deliverAt?: unknown
  delayMs?: unknown
}

/** Whether a message asks for a delivery time (fields or producer properties), and is not already timed. */
export function asksForTimer(message: Message): boolean {
  const fields = message as TimerFields
  if (fields.deliverAt !== undefined || fields.delayMs !== undefined) return true
  const properties = message.properties
  if (properties === undefined || properties === null || properties[TimerProperty.OUT_MS] !== undefined) return false
  return (
    properties[TimerProperty.DELIVER_MS] !== undefined ||
    properties[TimerProperty.DELAY_MS] !== undefined ||
    properties[TimerProperty.DELAY_SEC] !== undefined
  )
}

/**
 * RocketMQ's rounding of a delivery time to its slot: down to a multiple of the precision, and a
 * multiple itself one step lower, since slot s is delivered once the clock reaches s + precision.
 */
export function timerSlotTime(deliverAt: number, precisionMs: number): number {
  return deliverAt % precisionMs === 0 ? deliverAt - precisionMs : Math.floor(deliverAt / precisionMs) * precisionMs
}

/** The delivery time a message asks for, or a reason it is illegal. */
function deliveryTime(message: Message, now: number): number | { reason: string } {
  const fields = message as TimerFields
  if (fields.deliverAt !== undefined && fields.delayMs !== undefined) {
    return { reason: 'a message takes deliverAt or delayMs, not both' }
  }
  if (fields.deliverAt !== undefined) return fields.deliverAt as number
  if (fields.delayMs !== undefined) return now + (fields.delayMs as number)
  // RocketMQ's precedence: TIMER_DELAY_SEC, then TIMER_DELAY_MS, then TIMER_DELIVER_MS.
  const properties = message.properties ?? {}
  for (const [name, scale, relative] of [
    [TimerProperty.DELAY_SEC, 1000, true],
    [TimerProperty.DELAY_MS, 1, true],
    [TimerProperty.DELIVER_MS, 1, false],
  ] as const) {
    const text = properties[name]
    if (text === undefined) continue
    if (typeof text !== 'string' || !/^-?\d{1,16}$/.test(text)) {
      return { reason: `the ${name} property must be an integer, got ${JSON.stringify(text)}` }
    }
    return relative ? now + Number(text) * scale : Number(text)
  }
  return { reason: 'no delivery time' }
}

/**
 * The message to append for a timed put (asksForTimer was true; deliverAt / delayMs already
 * checked to be finite numbers): in the timer topic with TIMER_OUT_MS, REAL_TOPIC, REAL_QID and
 * UNIQ_KEY set; on its own topic at once when the time has come (or for a transactional prepared
 * record, which is never timed); a refusal beyond the horizon.
 */
export function timedMessage(message: Message, now: number, precisionMs: number, newUniqKey: () => string): Message | { reason: string } {
  const time = deliveryTime(message, now)
  if (typeof time !== 'number') return time
  const at = Math.floor(time)
  const { deliverAt: _at, delayMs: _delay, ...rest } = message as Message & TimerFields
  if (at <= now || !isQueuedRecord(typeof message.sysFlag === 'number' ? message.sysFlag : 0)) return rest
  if (at - now > TIMER_HORIZON_MS) {
    return {
      reason: `the delivery time ${new Date(at).toISOString()} is ${at - now} ms ahead; timers reach at most ${TIMER_HORIZON_MS} ms (7 days) ahead`,
    }
  }
  const properties: Record<string, string> = { ...message.properties }
  const fields = message as TimerFields
  // The field is kept as RocketMQ 5's own property, so a RocketMQ reader of the record sees it.
  if (fields.deliverAt !== undefined) properties[TimerProperty.DELIVER_MS] = String(fields.deliverAt)
  if (fields.delayMs !== undefined) properties[TimerProperty.DELAY_MS] = String(fields.delayMs)
  properties[TimerProperty.OUT_MS] = String(timerSlotTime(at, precisionMs))
  properties[PropertyName.REAL_TOPIC] = message.topic
  properties[PropertyName.REAL_QID] = String(message.queueId ?? 0)
  if (properties[PropertyName.UNIQ_KEY] === undefined || properties[PropertyName.UNIQ_KEY] === '') {
    properties[PropertyName.UNIQ_KEY] = newUniqKey()
  }
  return { ...rest, topic: TIMER_TOPIC, queueId: 0, properties }
}

/**
 * The message a due timer puts to its real topic and queue: the parked record's body, flags, born
 * time and host, reconsume count and properties, less the timer's own (CLEARED_AT_DELIVERY), with
 * RocketMQ 5's TIMER_ENQUEUE_MS (when the entry was written) and TIMER_DEQUEUE_MS (now).
 */
export function deliveredCopy(record: MessageExt, topic: string, queueId: number, enqueuedAt: number, now: number): Message {
  const properties: Record<string, string> = {}
  for (const name of Object.keys(record.properties)) if (!CLEARED_AT_DELIVERY.includes(name)) properties[name] = record.properties[name]
  properties[TimerProperty.ENQUEUE_MS] = String(enqueuedAt)
  properties[TimerProperty.DEQUEUE_MS] = String(now)
  return storedCopy(record, topic, queueId, properties)
}

/** The unit at `offset` of a consume queue (the timer topic's, a delay level's), or null when it cannot be read. */
export function readQueueUnit(queue: ConsumeQueue, offset: number): { offset: number; size: number; tagsCode: number } | null {
  const units = queue.getIndexBuffer(offset)
  if (units === null) return null
  try {
    if (units.size < 20) return null
    return ConsumeQueue.readUnit(units.buffer, 0)
  } finally {
    units.release()
  }
}

/**
 * The cancel marker (RocketMQ 5's TIMER_DEL_UNIQKEY) for the timer named by `msgId` (the msgId its
 * put returned, or its UNIQ_KEY), bound for its slot; null when no such timer is known or its
 * slot is before `readTime` (delivered or being delivered).
 */
export function cancelMarker(
  deps: { lookMessage(offset: number): MessageExt | null; findByKey(topic: string, key: string): readonly MessageExt[] },
  msgId: string,
  readTime: number,
): Message | null {
  let target: MessageExt | null = null
  try {
    const record = deps.lookMessage(parseMsgId(msgId).offset)
    if (record !== null && record.topic === TIMER_TOPIC && record.msgId === msgId) target = record
  } catch {
    // not an offset message id: a UNIQ_KEY
  }
  target ??=
    deps
      .findByKey(TIMER_TOPIC, msgId)
      .find((m) => m.properties[PropertyName.UNIQ_KEY] === msgId && m.properties[TimerProperty.DEL_UNIQKEY] === undefined) ?? null
  const out = Number(target?.properties[TimerProperty.OUT_MS])
  const key = target?.properties[PropertyName.UNIQ_KEY]
  if (target === null || key === undefined || !Number.isSafeInteger(out) || out < readTime) return null
  return {
    topic: TIMER_TOPIC,
    queueId: 0,
    body: 'cancel',
    properties: {
      [TimerProperty.OUT_MS]: String(out),
      [TimerProperty.DEL_UNIQKEY]: key,
      [PropertyName.REAL_TOPIC]: target.properties[PropertyName.REAL_TOPIC] ?? '',
      [PropertyName.REAL_QID]: target.properties[PropertyName.REAL_QID] ?? '0',
    },
  }
}
