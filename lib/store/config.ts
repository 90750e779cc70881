// MessageStoreConfig: RocketMQ's option names and behaviour defaults, with file sizes from an
// embedded profile (a Node service rarely wants 1 GiB commit-log files and 420 MB index files).
// `preset: 'rocketmq'` restores RocketMQ 4.9's exact sizes.
import { MQStoreError } from '../errors.js'
import { DEFAULT_MESSAGE_DELAY_LEVEL } from './commitlog/record-names.js'
import { parseMessageDelayLevel } from './schedule/delay-level-table.js'
import { HA_OPTION_NAMES } from './ha/ha-options.js'

export type FlushDiskType = 'ASYNC_FLUSH' | 'SYNC_FLUSH'

export interface MessageStoreConfig {
  /** Commit-log segment size in bytes. Embedded 128 MiB; RocketMQ 1 GiB. */
  mappedFileSizeCommitLog: number
  /** Consume-queue segment size in bytes, rounded up to a multiple of 20. Embedded 60,000 units; RocketMQ 300,000. */
  mappedFileSizeConsumeQueue: number
  /** Index slots per index file. Embedded 1,000,000; RocketMQ 5,000,000. */
  maxHashSlotNum: number
  /** Index entries per index file. Embedded 4,000,000; RocketMQ 20,000,000. */
  maxIndexNum: number
  flushDiskType: FlushDiskType
  flushIntervalCommitLog: number
  flushCommitLogLeastPages: number
  flushCommitLogThoroughInterval: number
  flushCommitLogTimed: boolean
  commitIntervalCommitLog: number
  commitCommitLogLeastPages: number
  commitCommitLogThoroughInterval: number
  syncFlushTimeout: number
  flushIntervalConsumeQueue: number
  flushConsumeQueueLeastPages: number
  flushConsumeQueueThoroughInterval: number
  flushConsumerOffsetInterval: number
  maxMessageSize: number
  checkCRCOnRecover: boolean
  maxTransferBytesOnMessageInMemory: number
  maxTransferCountOnMessageInMemory: number
  maxTransferBytesOnMessageInDisk: number
  maxTransferCountOnMessageInDisk: number
  /**
   * Share of physical memory, in percent: a read further behind the commit log's end than this
   * is "from disk" (on-disk transfer limits, suggestPullingFromSlave). 0 makes every read one.
   */
  accessMessageInMemoryMaxRatio: number
  messageIndexEnable: boolean
  messageIndexSafe: boolean
  maxMsgsNumBatch: number
  defaultQueryMaxNum: number
  transientStorePoolEnable: boolean
  transientStorePoolSize: number
  warmMapedFileEnable: boolean
  osPageCacheBusyTimeOutMills: number
  fileReservedTime: number
  deleteWhen: string
  diskMaxUsedSpaceRatio: number
  cleanResourceInterval: number
  destroyMapedFileIntervalForcibly: number
  redeleteHangedFileInterval: number
  deleteCommitLogFilesInterval: number
  deleteConsumeQueueFilesInterval: number
  cleanFileForciblyEnable: boolean
  /** Store host written into records and msgIds, "ip:port". */
  storeHost: string
  /** Born host used when a message does not carry one. */
  bornHost: string
  /**
   * true (default): every read returns its own copy of the records it serves; nothing done with a
   * message reaches the store. false: zero-copy bodies, views of a private copy-on-write mapping
   * of the commit log (docs/api.md, "Zero-copy reads", gives their rules).
   */
  copyMessageBody: boolean
  /**
   * Check each body's CRC before serving it (default true). A record that fails is not served;
   * the read counts it (bodyCrcFailures in the result and in stats()) and tells the logger.
   */
  checkCRCOnRead: boolean
  /**
   * What open() does with a commit-log record that fails its checks while data follows it:
   * 'tolerant' truncates there and reports it (RocketMQ's behaviour); 'strict' refuses to open
   * with a CORRUPTION error naming the byte range. A torn tail (only zeros after it) is truncated
   * under both.
   */
  corruptionPolicy: 'tolerant' | 'strict'
  /**
   * Consume-queue and index files, commit-log files other than the one being written, and sealed
   * compaction-log files are mapped on first use; when more than this many bytes of them are
   * mapped, the least recently used idle ones are unmapped (and mapped again on their next use).
   */
  mappingBudgetBytes: number
  /** Such a file unused for this long is unmapped by the next consume-queue flush pass. */
  mappingIdleMs: number
  /**
   * RocketMQ's delay levels: level n (1-based) waits the n-th item; units s, m, h, d. Default
   * "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h".
   */
  messageDelayLevel: string
  /** How often the schedule service saves its progress (config/delayOffset.json), ms. Default 10,000. */
  flushDelayOffsetInterval: number
  /** The timer's precision (RocketMQ 5's timerPrecisionMs): 1000 (default) or 100 ms. */
  timerPrecisionMs: number
  /** Size of each timer-log file (RocketMQ 5's mappedFileSizeTimerLog); at least 4096. Never change it on an existing store. */
  mappedFileSizeTimerLog: number
}

export type MessageStoreOptions = Partial<MessageStoreConfig> & { preset?: 'embedded' | 'rocketmq' }

const MiB = 1024 * 1024
/** The largest commit-log file: its positions are 32-bit ints (RocketMQ's setting is an int). */
export const MAX_COMMIT_LOG_FILE_BYTES = 2 ** 31 - 1

export const EMBEDDED_DEFAULTS: Readonly<MessageStoreConfig> = Object.freeze({
  mappedFileSizeCommitLog: 128 * MiB,
  mappedFileSizeConsumeQueue: 60_000 * 20,
  maxHashSlotNum: 1_000_000,
  maxIndexNum: 4_000_000,
  flushDiskType: 'ASYNC_FLUSH',
  flushIntervalCommitLog: 500,
  flushCommitLogLeastPages: 4,
  flushCommitLogThoroughInterval: 10_000,
  flushCommitLogTimed: true,
  commitIntervalCommitLog: 200,
  commitCommitLogLeastPages: 4,
  commitCommitLogThoroughInterval: 200,
  syncFlushTimeout: 5_000,
  flushIntervalConsumeQueue: 1_000,
  flushConsumeQueueLeastPages: 2,
  flushConsumeQueueThoroughInterval: 60_000,
  flushConsumerOffsetInterval: 5_000,
  maxMessageSize: 4 * MiB,
  checkCRCOnRecover: true,
  maxTransferBytesOnMessageInMemory: 256 * 1024,
  maxTransferCountOnMessageInMemory: 32,
  maxTransferBytesOnMessageInDisk: 64 * 1024,
  maxTransferCountOnMessageInDisk: 8,
  accessMessageInMemoryMaxRatio: 40,
  messageIndexEnable: true,
  messageIndexSafe: false,
  maxMsgsNumBatch: 64,
  defaultQueryMaxNum: 32,
  transientStorePoolEnable: false,
  transientStorePoolSize: 5,
  warmMapedFileEnable: false,
  osPageCacheBusyTimeOutMills: 1_000,
  fileReservedTime: 72,
  deleteWhen: '04',
  diskMaxUsedSpaceRatio: 75,
  cleanResourceInterval: 10_000,
  destroyMapedFileIntervalForcibly: 120_000,
  redeleteHangedFileInterval: 120_000,
  deleteCommitLogFilesInterval: 100,
  deleteConsumeQueueFilesInterval: 100,
  cleanFileForciblyEnable: true,
  storeHost: '127.0.0.1:10911',
  bornHost: '127.0.0.1:0',
  copyMessageBody: true,
  checkCRCOnRead: true,
  corruptionPolicy: 'tolerant',
  mappingBudgetBytes: 256 * MiB,
  mappingIdleMs: 30_000,
  messageDelayLevel: DEFAULT_MESSAGE_DELAY_LEVEL,
  flushDelayOffsetInterval: 10_000,
  timerPrecisionMs: 1000,
  mappedFileSizeTimerLog: 100 * MiB,
})

export const ROCKETMQ_SIZES: Readonly<Partial<MessageStoreConfig>> = Object.freeze({
  mappedFileSizeCommitLog: 1024 * MiB,
  mappedFileSizeConsumeQueue: 300_000 * 20,
  maxHashSlotNum: 5_000_000,
  maxIndexNum: 20_000_000,
})

/** Options that must be positive integers. */
const POSITIVE_INTEGERS = new Set<keyof MessageStoreConfig>([
  'mappedFileSizeCommitLog',
  'mappedFileSizeConsumeQueue',
  'maxHashSlotNum',
  'maxIndexNum',
  'flushIntervalCommitLog',
  'flushCommitLogThoroughInterval',
  'commitIntervalCommitLog',
  'commitCommitLogThoroughInterval',
  'syncFlushTimeout',
  'flushIntervalConsumeQueue',
  'flushConsumeQueueThoroughInterval',
  'flushConsumerOffsetInterval',
  'maxMessageSize',
  'maxTransferBytesOnMessageInMemory',
  'maxTransferCountOnMessageInMemory',
  'maxTransferBytesOnMessageInDisk',
  'maxTransferCountOnMessageInDisk',
  'maxMsgsNumBatch',
  'defaultQueryMaxNum',
  'transientStorePoolSize',
  'osPageCacheBusyTimeOutMills',
  'cleanResourceInterval',
  'flushDelayOffsetInterval',
  'mappedFileSizeTimerLog',
])

/** Options that are not store settings: the preset and what open() takes besides the config. */
const EXTRA_OPTION_NAMES = ['preset', 'logger', 'onProgress', ...HA_OPTION_NAMES]

/**
 * The known name closest to `name` (case ignored, Levenshtein distance), when it is close enough
 * to be a typo: at most a third of the name's length, and at most 4 edits; else a known name that
 * starts the given one or that it starts.
 */
export function nearestName(name: string, known: readonly string[]): string | null {
  const wanted = name.toLowerCase()
  let best: string | null = null
  let bestDistance = Math.min(4, Math.max(1, Math.floor(name.length / 3)))
  for (const candidate of known) {
    const distance = editDistance(wanted, candidate.toLowerCase())
    if (distance <= bestDistance) {
      if (distance < bestDistance || best === null) best = candidate
      bestDistance = distance
    }
  }
  if (best !== null) return best
  // A name with a suffix added or dropped ('maxMessageSizeBytes', 'flushDisk').
  return (
    known.find((candidate) => {
      const lower = candidate.toLowerCase()
      return Math.min(lower.length, wanted.length) >= 6 && (lower.startsWith(wanted) || wanted.startsWith(lower))
    }) ?? null
  )
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1)
      current.push(Math.min(previous[j] + 1, current[j - 1] + 1, substitution))
    }
    previous = current
  }
  return previous[b.length]
}

/** Validates options against the known names and types and fills in the defaults. */
export function resolveConfig(options: MessageStoreOptions = {}): MessageStoreConfig {
  if (options === null || typeof options !== 'object') {
    throw new MQStoreError('INVALID_OPTION', 'options must be an object')
  }
  const { preset, ...given } = options
  if (preset !== undefined && preset !== 'embedded' && preset !== 'rocketmq') {
    throw new MQStoreError('INVALID_OPTION', `preset must be 'embedded' or 'rocketmq', got ${String(preset)}`)
  }
  const config: MessageStoreConfig = { ...EMBEDDED_DEFAULTS, ...(preset === 'rocketmq' ? ROCKETMQ_SIZES : {}) }
  for (const [name, value] of Object.entries(given)) {
    if (!(name in EMBEDDED_DEFAULTS)) {
      const near = nearestName(name, [...Object.keys(EMBEDDED_DEFAULTS), ...EXTRA_OPTION_NAMES])
      throw new MQStoreError('INVALID_OPTION', `unknown option '${name}'${near === null ? '' : `; did you mean '${near}'?`}`)
    }
    if (value === undefined) continue
    const key = name as keyof MessageStoreConfig
    const expected = typeof EMBEDDED_DEFAULTS[key]
    if (typeof value !== expected) {
      throw new MQStoreError('INVALID_OPTION', `option '${name}' must be a ${expected}, got ${typeof value}`)
    }
    if (expected === 'number') {
      const number = value as number
      const positive = POSITIVE_INTEGERS.has(key)
      if (!Number.isSafeInteger(number) || number < 0 || (positive && number === 0)) {
        throw new MQStoreError(
          'INVALID_OPTION',
          `option '${name}' must be a ${positive ? 'positive' : 'non-negative'} integer, got ${number}`,
        )
      }
    }
    ;(config as unknown as Record<string, unknown>)[name] = value
  }
  if (config.corruptionPolicy !== 'tolerant' && config.corruptionPolicy !== 'strict') {
    throw new MQStoreError('INVALID_OPTION', `corruptionPolicy must be 'tolerant' or 'strict'`)
  }
  if (config.flushDiskType !== 'ASYNC_FLUSH' && config.flushDiskType !== 'SYNC_FLUSH') {
    throw new MQStoreError('INVALID_OPTION', `flushDiskType must be 'ASYNC_FLUSH' or 'SYNC_FLUSH'`)
  }
  // RocketMQ rounds the consume-queue file size up to whole 20-byte units.
  config.mappedFileSizeConsumeQueue = Math.ceil(config.mappedFileSizeConsumeQueue / 20) * 20
  if (config.mappedFileSizeCommitLog < 4096) {
    throw new MQStoreError('INVALID_OPTION', 'mappedFileSizeCommitLog must be at least 4096 bytes')
  }
  // A position in a commit-log file is a 32-bit int, as in RocketMQ (whose setting is an int):
  // the body CRCs of puts and reads are computed over 32-bit ranges of a file.
  if (config.mappedFileSizeCommitLog > MAX_COMMIT_LOG_FILE_BYTES) {
    throw new MQStoreError('INVALID_OPTION', `mappedFileSizeCommitLog must be at most ${MAX_COMMIT_LOG_FILE_BYTES} bytes (2 GiB - 1)`)
  }
  if (
    !/^\s*\d{1,2}\s*(;\s*\d{1,2}\s*)*;?\s*$/.test(config.deleteWhen) ||
    config.deleteWhen.split(';').some((h) => h.trim() !== '' && Number(h) > 23)
  ) {
    throw new MQStoreError('INVALID_OPTION', `deleteWhen must be local hours 0..23 separated by ';', got '${config.deleteWhen}'`)
  }
  if (config.diskMaxUsedSpaceRatio < 10) config.diskMaxUsedSpaceRatio = 10
  if (config.diskMaxUsedSpaceRatio > 95) config.diskMaxUsedSpaceRatio = 95
  parseHost(config.storeHost, 'storeHost')
  parseHost(config.bornHost, 'bornHost')
  parseMessageDelayLevel(config.messageDelayLevel)
  if (config.mappedFileSizeTimerLog < 4096) throw new MQStoreError('INVALID_OPTION', 'mappedFileSizeTimerLog must be at least 4096 bytes')
  if (config.timerPrecisionMs !== 100 && config.timerPrecisionMs !== 1000) {
    throw new MQStoreError('INVALID_OPTION', `timerPrecisionMs must be 1000 or 100, got ${String(config.timerPrecisionMs)}`)
  }
  return config
}

/** "ip:port" or "[ipv6]:port" → { address, port }. */
export function parseHost(text: string, name = 'host'): { address: string; port: number } {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+)):(\d{1,5})$/.exec(text)
  const port = match ? Number(match[3]) : -1
  if (match === null || port > 65535) {
    throw new MQStoreError('INVALID_OPTION', `option '${name}' must be "ip:port" or "[ipv6]:port", got '${text}'`)
  }
  return { address: match[1] ?? match[2], port }
}
