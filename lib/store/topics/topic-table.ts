// The topic table, persisted like RocketMQ's config/topics.json:
//   {"topicConfigTable":{"<topic>":{"topicName":..,"readQueueNums":..,"writeQueueNums":..,"perm":..,
//    "topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false, <our fields>}},
//    "dataVersion":{"timestamp":..,"counter":..}}
// Our fields (cleanupPolicy and the retention / compaction settings) sit beside RocketMQ's in each
// entry; only the ones a caller set are written, so a topic follows the defaults for the rest.
// RocketMQ's broker ignores fields it does not know, so the file stays readable by it.
//
// The queue counts are held per entry so that topic creation (queues per topic) can be added on
// top of this table without changing its file; until then an entry made by setTopicConfig carries
// RocketMQ's default of 8 read and write queues.

import { MQStoreError } from '../../errors.js'
import { validateTopic } from '../commitlog/record.js'
import type { Clock } from '../environment.js'
import { readFileWithBackup, writeFileDurably } from '../mapped/directory.js'

export type CleanupPolicy = 'delete' | 'compact' | 'compact,delete'

/** The per-topic retention and compaction settings (Kafka's topic settings, camel-cased). */
export interface TopicConfig {
  cleanupPolicy: CleanupPolicy
  /** A queue is cleaned when its dirty share of bytes is strictly above this, 0..1. */
  minCleanableDirtyRatio: number
  /** A message stays uncompacted at least this long after it was stored. */
  minCompactionLagMs: number
  /** A message becomes eligible for compaction at most this long after it was stored. */
  maxCompactionLagMs: number
  /** A tombstone stays readable this long after the first pass that kept it. */
  deleteRetentionMs: number
  /** Size of a compaction-log file; a cleaned group of files never exceeds it. */
  segmentBytes: number
  /** A non-empty compaction-log file older than this is rolled (on append and on a timer). */
  segmentMs: number
  /** compact,delete: files whose newest message is older than this are deleted; -1 = never. */
  retentionMs: number
  /** compact,delete: oldest files are deleted while the queue's log exceeds this; -1 = never. */
  retentionBytes: number
}

export type TopicConfigInput = Partial<TopicConfig>

const DAY_MS = 86_400_000

export const TOPIC_CONFIG_DEFAULTS: Readonly<TopicConfig> = Object.freeze({
  cleanupPolicy: 'delete',
  minCleanableDirtyRatio: 0.5,
  minCompactionLagMs: 0,
  maxCompactionLagMs: Number.MAX_SAFE_INTEGER,
  deleteRetentionMs: DAY_MS,
  segmentBytes: 8 * 1024 * 1024,
  segmentMs: 7 * DAY_MS,
  retentionMs: 7 * DAY_MS,
  retentionBytes: -1,
})

/** Smallest compaction-log file: one record of the largest allowed size must not be required to fit. */
export const MIN_SEGMENT_BYTES = 4096

// RocketMQ's TopicConfig defaults for the fields this table carries but does not interpret yet.
const DEFAULT_QUEUE_NUMS = 8
/** Most queues a topic may have (queue ids are 31-bit; this keeps a topic's folder listable). */
const MAX_QUEUE_NUMS = 65_536
const PERM_READ_WRITE = 6
const DEFAULT_FILTER_TYPE = 'SINGLE_TAG'

/** One entry of topicConfigTable: RocketMQ's fields, then the settings a caller set. */
export interface TopicEntry extends TopicConfigInput {
  topicName: string
  readQueueNums: number
  writeQueueNums: number
  perm: number
  topicFilterType: string
  topicSysFlag: number
  order: boolean
}

const OUR_FIELDS = Object.keys(TOPIC_CONFIG_DEFAULTS) as (keyof TopicConfig)[]
const ROCKETMQ_FIELDS = ['topicName', 'readQueueNums', 'writeQueueNums', 'perm', 'topicFilterType', 'topicSysFlag', 'order']

function invalid(message: string): MQStoreError {
  return new MQStoreError('INVALID_OPTION', message)
}

function normalisePolicy(value: unknown): CleanupPolicy | null {
  if (typeof value !== 'string') return null
  const parts = value.split(',').map((p) => p.trim())
  const set = new Set(parts)
  if (set.size !== parts.length || parts.some((p) => p !== 'delete' && p !== 'compact')) return null
  if (set.size === 2) return 'compact,delete'
  return parts[0] as CleanupPolicy
}

function integerIn(name: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw invalid(`${name} must be an integer >= ${min}, got ${JSON.stringify(value)}`)
  }
  return value
}

/**
 * Checks a partial configuration: unknown fields and bad values are refused with INVALID_OPTION.
 * Returns a copy holding only the fields given, with the policy written in its canonical order.
 */
export function validateTopicConfigInput(topic: string, input: unknown): TopicConfigInput {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw invalid(`configuration of topic ${topic} must be an object`)
  }
  const out: TopicConfigInput = {}
  for (const [name, value] of Object.entries(input as Record<string, unknown>)) {
    if (value === undefined) continue
    switch (name) {
      case 'cleanupPolicy': {
        const policy = normalisePolicy(value)
        if (policy === null) {
          throw invalid(`cleanupPolicy must be 'delete', 'compact' or 'compact,delete', got ${JSON.stringify(value)}`)
        }
        out.cleanupPolicy = policy
        break
      }
      case 'minCleanableDirtyRatio':
        if (typeof value !== 'number' || !(value >= 0 && value <= 1)) {
          throw invalid(`minCleanableDirtyRatio must be a number in [0, 1], got ${JSON.stringify(value)}`)
        }
        out.minCleanableDirtyRatio = value
        break
      case 'minCompactionLagMs':
      case 'deleteRetentionMs':
        out[name] = integerIn(name, value, 0)
        break
      case 'maxCompactionLagMs':
      case 'segmentMs':
        out[name] = integerIn(name, value, 1)
        break
      case 'segmentBytes':
        out.segmentBytes = integerIn(name, value, MIN_SEGMENT_BYTES)
        if (out.segmentBytes > 0x7fffffff) throw invalid(`segmentBytes must be at most 2 GiB - 1, got ${value}`)
        break
      case 'retentionMs':
      case 'retentionBytes':
        out[name] = integerIn(name, value, -1)
        break
      default:
        throw invalid(`unknown topic setting ${JSON.stringify(name)} for topic ${topic}`)
    }
  }
  return out
}

function resolve(entry: TopicConfigInput | undefined): TopicConfig {
  const config = { ...TOPIC_CONFIG_DEFAULTS }
  if (entry !== undefined) {
    for (const name of OUR_FIELDS) {
      const value = entry[name]
      if (value !== undefined) (config as Record<string, unknown>)[name] = value
    }
  }
  return config
}

function checkLags(topic: string, config: TopicConfig): void {
  if (config.minCompactionLagMs > config.maxCompactionLagMs) {
    throw invalid(
      `topic ${topic}: minCompactionLagMs ${config.minCompactionLagMs} is above maxCompactionLagMs ${config.maxCompactionLagMs}`,
    )
  }
}

export function hasCompact(policy: CleanupPolicy): boolean {
  return policy !== 'delete'
}

export class TopicTable {
  readonly path: string
  private readonly clock: Clock
  private readonly entries = new Map<string, TopicEntry>()
  /** Resolved settings per topic (dispatch asks for them on every record of a compacted topic). */
  private readonly resolved = new Map<string, TopicConfig>()
  private counter = 0

  constructor(path: string, clock: Clock) {
    this.path = path
    this.clock = clock
  }

  /** Reads the file (falling back to its .bak copy); a file that fails validation is refused. */
  load(): void {
    const parsed = readFileWithBackup(this.path)
    if (parsed === null) return
    const table = (parsed as { topicConfigTable?: unknown }).topicConfigTable
    if (table === null || typeof table !== 'object') {
      throw new MQStoreError('CORRUPTION', `${this.path}: no topicConfigTable object`)
    }
    const version = (parsed as { dataVersion?: { counter?: unknown } }).dataVersion
    if (typeof version?.counter === 'number') this.counter = version.counter
    for (const [topic, raw] of Object.entries(table as Record<string, Record<string, unknown>>)) {
      const ours: Record<string, unknown> = {}
      for (const name of OUR_FIELDS) if (raw[name] !== undefined) ours[name] = raw[name]
      let settings: TopicConfigInput
      try {
        settings = validateTopicConfigInput(topic, ours)
        checkLags(topic, resolve(settings))
      } catch (cause) {
        throw new MQStoreError('CORRUPTION', `${this.path}: topic ${topic}: ${(cause as Error).message}`, { cause })
      }
      this.entries.set(topic, { ...entryDefaults(topic), ...pickRocketMQ(raw), ...settings })
    }
  }

  has(topic: string): boolean {
    return this.entries.has(topic)
  }

  /** The settings in force for a topic: what was set, defaults for the rest. */
  get(topic: string): TopicConfig {
    let config = this.resolved.get(topic)
    if (config === undefined) {
      config = Object.freeze(resolve(this.entries.get(topic)))
      if (this.entries.has(topic)) this.resolved.set(topic, config)
    }
    return config
  }

  entry(topic: string): Readonly<TopicEntry> | undefined {
    return this.entries.get(topic)
  }

  topics(): string[] {
    return [...this.entries.keys()]
  }

  /**
   * What the table would hold after merging `input` into a topic's settings, validated, without
   * changing anything (so the caller can act on a change, e.g. abort a compaction, first).
   */
  preview(topic: string, input: unknown): { settings: TopicConfigInput; config: TopicConfig } {
    const why = validateTopic(topic)
    if (why !== null) throw invalid(`bad topic name ${JSON.stringify(topic)}: ${why}`)
    const given = validateTopicConfigInput(topic, input)
    const current = this.entries.get(topic)
    const settings: TopicConfigInput = {}
    for (const name of OUR_FIELDS) {
      const value = given[name] ?? current?.[name]
      if (value !== undefined) (settings as Record<string, unknown>)[name] = value
    }
    const config = resolve(settings)
    checkLags(topic, config)
    return { settings, config }
  }

  /** Merges `input` into the topic's settings and saves the table; returns the settings in force. */
  set(topic: string, input: unknown): TopicConfig {
    const { settings, config } = this.preview(topic, input)
    const current = this.entries.get(topic) ?? entryDefaults(topic)
    const next: TopicEntry = { ...entryDefaults(topic) }
    for (const name of ROCKETMQ_FIELDS)
      (next as unknown as Record<string, unknown>)[name] = (current as unknown as Record<string, unknown>)[name]
    Object.assign(next, settings)
    this.entries.set(topic, next)
    this.resolved.delete(topic)
    this.persist()
    return config
  }

  /**
   * Creates the topic with `queues` read and write queues, or changes the count of one that exists
   * (RocketMQ's createTopic / updateTopic). Puts spread over the write queues; a smaller count never
   * hides queues that hold messages: the read count only shrinks to `minReadQueues`.
   */
  setQueues(topic: string, queues: number, minReadQueues = 0): Readonly<TopicEntry> {
    const why = validateTopic(topic)
    if (why !== null) throw invalid(`bad topic name ${JSON.stringify(topic)}: ${why}`)
    if (!Number.isSafeInteger(queues) || queues < 1 || queues > MAX_QUEUE_NUMS) {
      throw invalid(`topic ${topic}: queues must be an integer from 1 to ${MAX_QUEUE_NUMS}, got ${JSON.stringify(queues)}`)
    }
    const next: TopicEntry = { ...(this.entries.get(topic) ?? entryDefaults(topic)) }
    next.writeQueueNums = queues
    next.readQueueNums = Math.max(queues, minReadQueues)
    this.entries.set(topic, next)
    this.resolved.delete(topic)
    this.persist()
    return next
  }

  /** Writes the whole table: temp file, fsync, copy of the old file to .bak, rename, directory fsync. */
  persist(): void {
    this.counter++
    const topicConfigTable: Record<string, TopicEntry> = {}
    for (const [topic, entry] of [...this.entries].sort((a, b) => (a[0] < b[0] ? -1 : 1))) topicConfigTable[topic] = entry
    const text = JSON.stringify({ topicConfigTable, dataVersion: { timestamp: this.clock.now(), counter: this.counter } }, null, 2)
    writeFileDurably(this.path, text, { backup: true })
  }
}

function entryDefaults(topic: string): TopicEntry {
  return {
    topicName: topic,
    readQueueNums: DEFAULT_QUEUE_NUMS,
    writeQueueNums: DEFAULT_QUEUE_NUMS,
    perm: PERM_READ_WRITE,
    topicFilterType: DEFAULT_FILTER_TYPE,
    topicSysFlag: 0,
    order: false,
  }
}

function pickRocketMQ(raw: Record<string, unknown>): Partial<TopicEntry> {
  const out: Record<string, unknown> = {}
  for (const name of ROCKETMQ_FIELDS) if (raw[name] !== undefined) out[name] = raw[name]
  return out as Partial<TopicEntry>
}
