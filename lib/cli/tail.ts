// `mqstore tail <dir> --topic T [--queue N] [--from ...] [--follow]`: prints the messages of a
// topic's queues, read-only. With --follow it follows the store through a read-only opener
// (MessageStore.open with readOnly), which waits for the writer's new messages until stopped.
import { Buffer } from 'node:buffer'
import type { DecodedMessage } from '../store/commitlog/record.js'
import { MessageStore, type MessageStoreReader } from '../store/message-store.js'
import { CQ_STORE_UNIT_SIZE } from '../store/queue/consume-queue.js'
import { CliError, EXIT, intOption, requireOption, stringOption, UsageError, type Command, type CommandContext } from './frame.js'
import { StoreReader, type QueueRef } from './store-reader.js'

/** How often --follow without --queue looks for queues of the topic it does not follow yet. */
const NEW_QUEUES_POLL_MS = 200
/** The consumer group --follow reads as (it commits nothing). */
const FOLLOW_GROUP = 'mqstore-tail'
const READ_BATCH = 256

export type BinaryEncoding = 'hex' | 'base64'

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** The body as text when it is valid UTF-8, else in `encoding`. */
export function bodyText(body: Uint8Array, encoding: BinaryEncoding): { body: string; encoding: 'utf8' | BinaryEncoding } {
  try {
    return { body: utf8.decode(body), encoding: 'utf8' }
  } catch {
    return { body: Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString(encoding), encoding }
  }
}

/** A message as `tail` and `get` print it in --json mode. */
export function messageJson(m: DecodedMessage, encoding: BinaryEncoding): Record<string, unknown> {
  const { body, encoding: bodyEncoding } = bodyText(m.body, encoding)
  return {
    topic: m.topic,
    queueId: m.queueId,
    queueOffset: m.queueOffset,
    commitLogOffset: m.commitLogOffset,
    storeSize: m.storeSize,
    msgId: m.msgId,
    storeTime: new Date(m.storeTimestamp).toISOString(),
    bornTime: new Date(m.bornTimestamp).toISOString(),
    bornHost: `${m.bornHost.address}:${m.bornHost.port}`,
    tags: m.tags ?? null,
    keys: m.keys,
    properties: m.properties,
    reconsumeTimes: m.reconsumeTimes,
    sysFlag: m.sysFlag,
    body,
    bodyEncoding,
  }
}

/** One line per message for humans. */
export function messageLine(m: DecodedMessage, encoding: BinaryEncoding): string {
  const { body, encoding: bodyEncoding } = bodyText(m.body, encoding)
  const parts = [`${m.topic}/${m.queueId}@${m.queueOffset}`, new Date(m.storeTimestamp).toISOString(), `offset=${m.commitLogOffset}`]
  if (m.tags !== undefined) parts.push(`tags=${m.tags}`)
  if (m.keys.length > 0) parts.push(`keys=${m.keys.join(',')}`)
  parts.push(bodyEncoding === 'utf8' ? JSON.stringify(body) : `${bodyEncoding}:${body}`)
  return parts.join(' ')
}

export function binaryOption(ctx: CommandContext): BinaryEncoding {
  const value = stringOption(ctx.values, 'binary') ?? 'base64'
  if (value !== 'hex' && value !== 'base64') throw new UsageError(`--binary is hex or base64, got '${value}'`)
  return value
}

type From = { kind: 'earliest' } | { kind: 'latest' } | { kind: 'offset'; offset: number } | { kind: 'time'; timestamp: number }

export function parseFrom(text: string | undefined): From {
  if (text === undefined || text === 'earliest') return { kind: 'earliest' }
  if (text === 'latest') return { kind: 'latest' }
  if (/^\d+$/.test(text)) {
    const offset = Number(text)
    if (!Number.isSafeInteger(offset)) throw new UsageError(`--from offset ${text} is too large`)
    return { kind: 'offset', offset }
  }
  // An ISO date or date-time: 2026-12-01, 2026-12-01T06:00:00Z, ...
  const timestamp = /^\d{4}-\d{2}-\d{2}/.test(text) ? Date.parse(text) : Number.NaN
  if (Number.isNaN(timestamp)) throw new UsageError(`--from is earliest, latest, a queue offset or an ISO time, got '${text}'`)
  return { kind: 'time', timestamp }
}

function startOffset(reader: StoreReader, queue: QueueRef, from: From): number {
  const min = reader.minOffset(queue)
  const max = reader.maxOffset(queue)
  switch (from.kind) {
    case 'earliest':
      return min
    case 'latest':
      return max
    case 'offset':
      return Math.min(Math.max(from.offset, min), max)
    case 'time':
      return reader.offsetByTime(queue, from.timestamp, min, max)
  }
}

/** Where --follow starts in one queue of a reader (an offset or a time is clamped to the queue). */
function followStart(reader: MessageStoreReader, topic: string, queueId: number, from: From): 'earliest' | 'latest' | number {
  if (from.kind === 'earliest' || from.kind === 'latest') return from.kind
  const min = reader.getMinOffsetInQueue(topic, queueId)
  const max = reader.getMaxOffsetInQueue(topic, queueId)
  if (from.kind === 'offset') return Math.min(Math.max(from.offset, min), max)
  if (max <= min) return min
  // The nearest message by store time; the first one stored at or after the time is wanted.
  const nearest = reader.getOffsetInQueueByTime(topic, queueId, from.timestamp)
  return reader.getMessageStoreTimeStamp(topic, queueId, nearest) < from.timestamp ? nearest + 1 : nearest
}

/** The queues --follow reads: the given one, or the topic's (queue 0 of a topic not there yet). */
function followedQueues(reader: MessageStoreReader, topic: string, queueId: number | undefined): number[] {
  if (queueId !== undefined) return [queueId]
  const count = reader.listTopics().find((t) => t.topic === topic)?.readQueueNums ?? 0
  return count === 0 ? [0] : Array.from({ length: count }, (_, i) => i)
}

/** --follow: every followed queue through the reader's consume(), until interrupted or the limit. */
async function follow(
  ctx: CommandContext,
  topic: string,
  queueId: number | undefined,
  from: From,
  limit: number,
  print: (m: DecodedMessage) => void,
): Promise<number> {
  const reader = await MessageStore.open(ctx.positionals[0], { readOnly: true })
  const done = new AbortController()
  const signal = AbortSignal.any([ctx.signal, done.signal])
  const running = new Map<number, Promise<void>>()
  let printed = 0
  const followQueue = async (id: number): Promise<void> => {
    for await (const m of reader.consume({ group: FOLLOW_GROUP, topic, queueId: id, from: followStart(reader, topic, id, from), signal })) {
      print(m)
      if (++printed >= limit) done.abort()
    }
  }
  const startNew = () => {
    for (const id of followedQueues(reader, topic, queueId)) if (!running.has(id)) running.set(id, followQueue(id))
  }
  try {
    startNew()
    const timer = queueId === undefined ? setInterval(startNew, NEW_QUEUES_POLL_MS) : null
    await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })))
    if (timer !== null) clearInterval(timer)
    await Promise.all(running.values())
  } finally {
    await reader.close()
  }
  return EXIT.OK
}

export const tailCommand: Command = {
  name: 'tail',
  summary: "print a topic's messages, optionally following new ones (read-only)",
  synopsis: 'tail <dir> --topic T [--queue N] [--from earliest|latest|<offset>|<ISO time>] [--follow]',
  description: `Prints the messages of one topic (every queue, or --queue N), queue by queue, from --from on:
earliest (the default), latest (only new messages, with --follow), a queue offset, or an ISO time
(the first message stored at or after it). A body that is valid UTF-8 prints as text, any other as
--binary (base64 by default, or hex). With --json, one JSON object per line (NDJSON).

--follow opens the store as a read-only opener and prints new messages as the writer (another
process) adds them, within milliseconds, until interrupted (Ctrl-C, SIGTERM), then exits 0; without
--queue it also follows queues the topic gains. Read-only: no lock is taken and nothing is written.
Exit code 4 when the topic (or queue) does not exist, without --follow.`,
  positionals: [1, 1],
  options: {
    topic: { type: 'string', value: 'T', description: 'the topic (required)' },
    queue: { type: 'string', value: 'N', description: 'only this queue id (default: every queue of the topic)' },
    from: { type: 'string', value: 'WHERE', description: 'earliest (default), latest, a queue offset, or an ISO time' },
    follow: { type: 'boolean', short: 'f', description: 'keep printing new messages until interrupted' },
    limit: { type: 'string', value: 'N', description: 'stop after N messages' },
    binary: { type: 'string', value: 'hex|base64', description: 'encoding of bodies that are not UTF-8 (default base64)' },
  },
  async run(ctx) {
    const topic = requireOption(ctx.values, 'topic')
    const queueId = intOption(ctx.values, 'queue')
    const limit = intOption(ctx.values, 'limit', 1) ?? Number.POSITIVE_INFINITY
    const from = parseFrom(stringOption(ctx.values, 'from'))
    const encoding = binaryOption(ctx)
    const print = (m: DecodedMessage) => ctx.line(ctx.json ? JSON.stringify(messageJson(m, encoding)) : messageLine(m, encoding))
    if (ctx.values.follow === true) return follow(ctx, topic, queueId, from, limit, print)
    using reader = StoreReader.open(ctx.positionals[0])
    const queues = (): QueueRef[] =>
      queueId === undefined ? reader.queues().filter((q) => q.topic === topic) : [reader.queue(topic, queueId)]
    if (queues().every((q) => q.segments.length === 0)) {
      const what = queueId === undefined ? `topic ${topic}` : `queue ${topic}/${queueId}`
      throw new CliError(`no ${what} in this store (--follow waits for it)`, EXIT.NOT_FOUND)
    }
    let printed = 0
    for (const queue of queues()) {
      let position = startOffset(reader, queue, from)
      for (;;) {
        const units = reader.readUnits(queue, position, Math.min(READ_BATCH, limit - printed))
        if (units.length === 0) {
          // Retention removed the files under the position: go on from the queue's new start.
          const first = queue.segments[0]
          if (first !== undefined && position * CQ_STORE_UNIT_SIZE < first.offset) {
            position = reader.minOffset(queue)
            continue
          }
          break
        }
        for (const unit of units) {
          const message = reader.readMessage(unit.commitLogOffset)
          // A unit whose record is gone (expired, or not readable yet) is skipped.
          if (message !== null) {
            print(message)
            printed++
          }
          position = unit.queueOffset + 1
        }
        if (printed >= limit) return EXIT.OK
      }
    }
    return EXIT.OK
  },
}
