// The public types of the store's API: what a program puts, gets back and passes as options.
import type { DecodedMessage } from './commitlog/record.js'
import type { RecoveryOutcome } from './commitlog/commit-log.js'
import type { MessageStoreOptions } from './config.js'
import type { Clock, DiskUsageSource } from './environment.js'
import type { CleanupStats } from './cleanup/cleanup-service.js'
import type { DiskReading } from './cleanup/disk-policy.js'
import type { RunningFlagState } from './running-flags.js'
import type { StoreStats } from './store-stats.js'

export type { PutMessageStatus } from './commitlog/commit-log.js'
export { PutMessageResult } from './commitlog/commit-log.js'
export type { HostAddress } from './commitlog/record.js'
export type { RecoveryOutcome } from './commitlog/commit-log.js'

/** A message to put. Only topic and body are required. */
export interface Message {
  topic: string
  queueId?: number
  body: Uint8Array | string
  tags?: string
  keys?: string | string[]
  properties?: Record<string, string>
  flag?: number
  sysFlag?: number
  bornTimestamp?: number
  bornHost?: string
  reconsumeTimes?: number
  preparedTransactionOffset?: number
}

/** A stored message as returned: RocketMQ MessageExt's fields. */
export type MessageExt = DecodedMessage

export type GetMessageStatus =
  | 'FOUND'
  | 'NO_MATCHED_MESSAGE'
  | 'MESSAGE_WAS_REMOVING'
  | 'OFFSET_FOUND_NULL'
  | 'OFFSET_OVERFLOW_BADLY'
  | 'OFFSET_OVERFLOW_ONE'
  | 'OFFSET_TOO_SMALL'
  | 'NO_MATCHED_LOGIC_QUEUE'
  | 'NO_MESSAGE_IN_QUEUE'

export interface GetMessageResult {
  status: GetMessageStatus
  messages: MessageExt[]
  nextBeginOffset: number
  minOffset: number
  maxOffset: number
  /** Total bytes of the records returned. */
  bufferTotalSize: number
  suggestPullingFromSlave: boolean
}

/** A tag subscription: a list of tags, an expression "a || b", or '*' / undefined for all. */
export type MessageFilter = { tags?: string[] | string } | string[] | string

export interface QueryMessageResult {
  messages: MessageExt[]
  indexLastUpdateTimestamp: number
  indexLastUpdatePhyoffset: number
}

export interface ConsumeOptions {
  group: string
  topic: string
  queueId: number
  /** Where to start: the group's committed offset (default), the queue's min or max, or an offset. */
  from?: 'committed' | 'earliest' | 'latest' | number
  tags?: string[] | string
  signal?: AbortSignal
  /** Commit after every message handed out (default false: call `commit()` yourself). */
  autoCommit?: boolean
  /** Messages fetched per read (default 32). */
  batchSize?: number
}

/** How an offset commit is kept. */
export interface CommitOptions {
  /**
   * true: the commit's promise resolves once the offset is on disk (file and directory synced).
   * false: kept in memory, on disk within flushConsumerOffsetInterval (a crash may lose it).
   */
  durable?: boolean
}

/** An async iterable over one queue that waits for new messages; see MessageStore.consume. */
export interface Subscription extends AsyncIterable<MessageExt> {
  /** The queue offset after the last message handed out. */
  readonly position: number
  /**
   * Commits `position` (or the given offset) as the group's offset for the queue. Durable by
   * default: resolves once the offset is on disk; `{ durable: false }` resolves at once and leaves
   * the write to the periodic save.
   */
  commit(offset?: number, options?: CommitOptions): Promise<void>
}

/** 'debug' carries the reason of every refused put; the others what the store repaired or noticed. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error'

export interface OpenOptions extends MessageStoreOptions {
  /** Called with what the store repaired or noticed at open and while running. */
  logger?: (level: LogLevel, message: string) => void
  /** Called while open() scans the commit log after a crash (about every 64 MiB, and at the end). */
  onProgress?: (progress: { phase: 'recover'; scannedBytes: number; totalBytes: number }) => void
  /** @internal The clock policies read (retention, compaction lags); the real clock by default. */
  clock?: Clock
  /** @internal Where disk usage is read from; `fs.statfs` by default. */
  diskUsage?: DiskUsageSource
}

/** A repair that open() or a running store made, as stats() lists them. */
export interface Repair {
  action: string
  reason: string
}

/** What stats() returns: the counters and rates of StoreStats plus the store's state. */
export interface MessageStoreStats extends StoreStats {
  commitLogMinOffset: number
  commitLogMaxOffset: number
  commitLogFlushedOffset: number
  dispatchBehindBytes: number
  lastExitOK: boolean
  recovery: RecoveryOutcome | null
  repairs: Repair[]
  consumeQueueCount: number
  indexFileCount: number
  /** Usage of the partitions holding the commit log and the consume queues, as cleanup last read it. */
  diskUsage: DiskReading[]
  /** RocketMQ's RunningFlags: the bits (`value`) and each flag set, with why and since when. */
  runningFlags: { value: number; flags: RunningFlagState[] }
  /** Retention: files and bytes deleted, the last pass and its reason. */
  cleanup: Omit<CleanupStats, 'diskUsage'>
}
