// Checks of what callers pass in, and the building of a record from a Message. Misuse of the API
// (wrong types, out-of-range numbers) throws TypeError/RangeError; what RocketMQ reports as a
// status (an illegal message, oversized properties) comes back as a PrepareFailure for that
// message alone.
import { Buffer } from 'node:buffer'
import {
  encodeProperties,
  isPlainAscii,
  prepareMessageRecord,
  validateTopic,
  type EncodedRecord,
  type HostAddress,
  type PrepareFailure,
  type PreparedRecord,
  type RecordParts,
} from './commitlog/record.js'
import { parseHost } from './config.js'
import type { CommitOptions, ConsumeOptions, Message, MessageFilter } from './types.js'

const GROUP_PATTERN = /^[%|a-zA-Z0-9_-]{1,255}$/
const QUEUE_ID_MAX = 0x7fffffff
/** The property separators of RocketMQ's properties string; tags and keys may not hold them. */
const SEPARATORS = /[\u0000\u0001\u0002]/

export function checkName(name: string, what: string): void {
  if (typeof name !== 'string' || !GROUP_PATTERN.test(name)) {
    throw new TypeError(`${what} must be 1 to 255 characters of [%|a-zA-Z0-9_-], got ${JSON.stringify(name)}`)
  }
}

export function checkQueue(topic: string, queueId: number): void {
  if (typeof topic !== 'string') throw new TypeError('topic must be a string')
  const invalid = validateTopic(topic)
  if (invalid !== null) throw new TypeError(`invalid topic ${JSON.stringify(topic)}: ${invalid}`)
  checkQueueId(queueId, 'queueId')
}

function checkQueueId(queueId: number, what: string): void {
  if (!Number.isSafeInteger(queueId) || queueId < 0 || queueId > QUEUE_ID_MAX) {
    throw new RangeError(`${what} must be an integer from 0 to 2^31-1`)
  }
}

export function checkOffset(offset: number, what = 'offset'): void {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`${what} must be a non-negative integer`)
}

export function checkPositive(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`${what} must be a positive integer`)
}

/**
 * Checks a lookup by key and fills in its time range: `begin` defaults to 0 and `end` to `now`
 * (both ms, non-negative integers, begin <= end).
 */
export function checkQuery(
  topic: string,
  key: string,
  maxNum: number,
  begin: number | undefined,
  end: number | undefined,
  now: number,
): { begin: number; end: number } {
  const range = { begin: begin ?? 0, end: end ?? now }
  checkQueryArguments(topic, key, maxNum, range.begin, range.end)
  return range
}

/**
 * Messages a consume() read takes by default. Each read has a fixed cost (above all the
 * ArrayBuffer its bodies are copied into, a few microseconds where V8's array-buffer sweeper
 * frees on another thread) that 32 messages, RocketMQ's pull size, leave at a third of a
 * consume()'s time; reads stay within maxTransferBytesOnMessageInMemory.
 */
export const CONSUME_BATCH_SIZE = 128

/**
 * The checks of consume()'s options, for the writer's and a reader's subscriptions alike: the
 * group, the batch size and the tags, then one queue (with queueId) or every queue of a topic
 * (which starts at committed, earliest or latest, never at an offset).
 */
export function checkConsumeOptions(options: ConsumeOptions): { batchSize: number; tags: string[] | undefined } {
  checkName(options.group, 'group')
  const batchSize = options.batchSize ?? CONSUME_BATCH_SIZE
  checkPositive(batchSize, 'batchSize')
  const tags = filterTags(options.tags)
  if (options.queueId !== undefined) {
    checkQueue(options.topic, options.queueId)
  } else {
    checkQueue(options.topic, 0)
    if (typeof options.from === 'number')
      throw new TypeError('from: an offset needs a queueId (a topic subscription starts every queue at committed, earliest or latest)')
  }
  return { batchSize, tags }
}

/** checkQuery's checks of a range already filled in, without making an object (a lookup is a few microseconds). */
export function checkQueryArguments(topic: string, key: string, maxNum: number, begin: number, end: number): void {
  if (typeof topic !== 'string') throw new TypeError('topic must be a string')
  if (typeof key !== 'string' || key === '') throw new TypeError('key must be a non-empty string')
  checkPositive(maxNum, 'maxNum')
  checkOffset(begin, 'begin')
  checkOffset(end, 'end')
  if (begin > end) throw new RangeError(`begin (${begin}) is after end (${end})`)
}

/** The `durable` flag of commit options (false when absent); misuse is a TypeError. */
export function checkCommitOptions(options: CommitOptions | undefined): boolean {
  if (options === undefined) return false
  if (options === null || typeof options !== 'object') throw new TypeError('commit options must be an object')
  const { durable } = options
  if (durable !== undefined && typeof durable !== 'boolean') throw new TypeError('options.durable must be a boolean')
  return durable === true
}

/** What a record takes from the store rather than from the message. */
export interface RecordDefaults {
  storeHost: HostAddress
  bornHost: HostAddress
  maxMessageSize: number
}

/** RocketMQ's KEYS property holds every key of a message, separated by this character. */
export const KEY_SEPARATOR = ' '

/** The message's keys as RocketMQ stores them: one string, space-separated. */
export function keysString(keys: Message['keys']): string | undefined {
  if (keys === undefined || typeof keys === 'string') return keys
  // One key is the common case (and its own KEYS string): no join, no callback per key.
  if (Array.isArray(keys) && keys.length === 1 && typeof keys[0] === 'string') return keys[0]
  if (!Array.isArray(keys) || keys.some((k) => typeof k !== 'string')) {
    throw new TypeError('message.keys must be a string or an array of strings')
  }
  return keys.join(KEY_SEPARATOR)
}

/**
 * Why a list of keys cannot be stored as given, or null: a key holding the separator would be
 * indexed (and found) as several keys. A keys string is RocketMQ's raw form and is split as is.
 */
export function invalidKeys(keys: Message['keys']): string | null {
  if (!Array.isArray(keys)) return null
  for (const key of keys) {
    if (typeof key === 'string' && key.includes(KEY_SEPARATOR)) {
      const parts = key.split(KEY_SEPARATOR).filter((part) => part !== '')
      return (
        `key ${JSON.stringify(key)} contains a space, RocketMQ's KEYS separator: it would be indexed as ` +
        `${parts.length} keys ${JSON.stringify(parts)}; use another character`
      )
    }
  }
  return null
}

/**
 * The misuse buildRecord throws for (a message that is not an object, fields of the wrong type),
 * checked alone: a batch checks every message first, then builds records a slice at a time.
 */
export function checkMessageShape(message: Message): void {
  if (message === null || typeof message !== 'object') throw new TypeError('message must be an object')
  if (typeof message.topic !== 'string') throw new TypeError('message.topic must be a string')
  checkQueueId(message.queueId ?? 0, 'message.queueId')
  const body: unknown = message.body
  if (typeof body !== 'string' && !(body instanceof Uint8Array)) throw new TypeError('message.body must be a Uint8Array or a string')
  const tags: unknown = message.tags
  if (tags !== undefined && typeof tags !== 'string') throw new TypeError('message.tags must be a string')
  const keys: unknown = message.keys
  if (keys !== undefined && typeof keys !== 'string') keysString(keys as string[])
}

/**
 * Validates a message and lays out its record; a message RocketMQ would refuse fails alone.
 * `bodyCRC`: the body's BODYCRC when the caller computed it (-1 or undefined: computed here).
 */
export function buildRecord(
  message: Message,
  now: number,
  defaults: RecordDefaults,
  bodyCRC?: number,
  into: EncodedRecord | null = null,
): PreparedRecord | PrepareFailure {
  if (message === null || typeof message !== 'object') throw new TypeError('message must be an object')
  const { topic, body } = message
  if (typeof topic !== 'string') throw new TypeError('message.topic must be a string')
  const queueId = message.queueId ?? 0
  checkQueueId(queueId, 'message.queueId')
  let bodyBytes: Uint8Array
  if (typeof body === 'string') bodyBytes = Buffer.from(body, 'utf8')
  else if (body instanceof Uint8Array) bodyBytes = body
  else throw new TypeError('message.body must be a Uint8Array or a string')
  const { tags, properties } = message
  if (tags !== undefined && typeof tags !== 'string') throw new TypeError('message.tags must be a string')
  const keys = keysString(message.keys)
  const badKeys = invalidKeys(message.keys)
  if (badKeys !== null) return { status: 'MESSAGE_ILLEGAL', reason: badKeys }
  const shownTags = tags === '' ? undefined : tags
  const shownKeys = keys === '' ? undefined : keys
  let propertiesString: string | null = null
  let namedTags = shownTags
  let namedKeys = shownKeys
  let uniqKey: string | undefined
  let bornHost: HostAddress
  try {
    if (properties !== undefined) {
      propertiesString = encodeProperties(withTagsAndKeys(properties, tags, keys))
      // What the record holds: the message's own tags and keys win over the properties'.
      namedTags = shown(tags ?? properties.TAGS)
      namedKeys = shown(keys ?? properties.KEYS)
      uniqKey = shown(properties.UNIQ_KEY)
    } else {
      // The common message carries only TAGS and KEYS: no properties object and no properties
      // string; the record writes them as bytes. Text that is not plain ASCII takes the string
      // path, which also reports a separator in it.
      if ((shownTags !== undefined && !isPlainAscii(shownTags)) || (shownKeys !== undefined && !isPlainAscii(shownKeys))) {
        propertiesString = encodeTagsAndKeys(tags, keys)
      }
    }
    bornHost = message.bornHost === undefined ? defaults.bornHost : parseHost(message.bornHost, 'bornHost')
  } catch (error) {
    return { status: 'MESSAGE_ILLEGAL', reason: (error as Error).message }
  }
  // One object refilled for every message: prepareMessageRecord copies what it keeps and holds no
  // reference to it (an object per put was a fifth of what a put allocated).
  const parts = PARTS
  parts.topic = topic
  parts.queueId = queueId
  parts.body = bodyBytes
  parts.flag = message.flag ?? 0
  parts.sysFlag = message.sysFlag ?? 0
  parts.bornTimestamp = message.bornTimestamp ?? now
  parts.bornHost = bornHost
  parts.reconsumeTimes = message.reconsumeTimes ?? 0
  parts.preparedTransactionOffset = message.preparedTransactionOffset ?? 0
  const prepared = prepareMessageRecord(
    parts,
    defaults.storeHost,
    propertiesString,
    namedTags,
    namedKeys,
    uniqKey,
    bodyCRC ?? -1,
    defaults.maxMessageSize,
    into,
  )
  // Nothing of the message stays reachable from here once its put is done.
  parts.body = NO_BODY
  parts.bornHost = defaults.bornHost
  return prepared
}

/** A message's record fields, one shape for every message (see PARTS). */
class MessageParts implements RecordParts {
  topic = ''
  queueId = 0
  body: Uint8Array = NO_BODY
  flag = 0
  sysFlag = 0
  bornTimestamp = 0
  bornHost: HostAddress = { address: '127.0.0.1', port: 0 }
  reconsumeTimes = 0
  preparedTransactionOffset = 0
}

const NO_BODY = new Uint8Array(0)
const PARTS = new MessageParts()

/** A property value as dispatch sees it: undefined when absent, empty or not a string. */
function shown(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined
}

function withTagsAndKeys(
  properties: Record<string, string>,
  tags: string | undefined,
  keys: string | undefined,
): Record<string, string | undefined> {
  const all: Record<string, string | undefined> = { ...properties }
  if (tags !== undefined) all.TAGS = tags
  if (keys !== undefined) all.KEYS = keys
  return all
}

/** encodeProperties({ TAGS: tags, KEYS: keys }) without the object. */
function encodeTagsAndKeys(tags: string | undefined, keys: string | undefined): string {
  if ((tags !== undefined && SEPARATORS.test(tags)) || (keys !== undefined && SEPARATORS.test(keys))) {
    return encodeProperties({ TAGS: tags, KEYS: keys }) // throws the precise error
  }
  const tagsPart = tags === undefined || tags === '' ? '' : `TAGS\u0001${tags}`
  const keysPart = keys === undefined || keys === '' ? '' : `KEYS\u0001${keys}`
  return tagsPart === '' ? keysPart : keysPart === '' ? tagsPart : `${tagsPart}\u0002${keysPart}`
}

/** Normalises a filter to a list of tags, or undefined for "everything"; a malformed one is a TypeError. */
export function filterTags(filter: MessageFilter | undefined): string[] | undefined {
  if (filter === undefined || filter === null) return undefined
  const tags: unknown = typeof filter === 'string' || Array.isArray(filter) ? filter : (filter as { tags?: unknown }).tags
  if (tags === undefined) return undefined
  const valid = typeof tags === 'string' || (Array.isArray(tags) && tags.every((t) => typeof t === 'string'))
  if (!valid) throw new TypeError("a filter is a tag list, a 'a || b' expression, '*', or { tags }")
  const list = (typeof tags === 'string' ? tags.split('||') : (tags as string[])).map((t) => t.trim()).filter((t) => t !== '')
  if (list.length === 0 || list.includes('*')) return undefined
  return list
}
