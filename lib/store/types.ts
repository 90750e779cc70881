// The public types of the store's API: what a program puts, gets back and passes as options.
import type { DecodedMessage } from './commitlog/record.js'
import type { PutMessageResult, RecoveryOutcome } from './commitlog/commit-log.js'
import type { MessageStoreOptions } from './config.js'
import type { Clock, DiskUsageSource } from './environment.js'
import type { CleanupStats } from './cleanup/cleanup-service.js'
import type { DiskReading } from './cleanup/disk-policy.js'
import type { RunningFlagState } from './running-flags.js'
import type { StoreStats } from './store-stats.js'
import type { ScheduleStats } from './schedule/schedule-stats.js'
import type { TimerStats } from './timer/timer-stats.js'
import type { RetryStats } from './retry/retry-stats.js'
import type { CleanerStats, CompactionOptions } from './compaction/compaction-service.js'
import type { TopicConfigInput } from './topics/topic-table.js'

export type { CleanupPolicy, TopicConfig, TopicConfigInput } from './topics/topic-table.js'
export type { CleanerStats, CompactionOptions, CompactReport } from './compaction/compaction-service.js'
export type { PassResult } from './compaction/cleaner.js'
export type { ScheduleLevelStats, ScheduleStats } from './schedule/schedule-stats.js'
export type { TimerStats } from './timer/timer-stats.js'
export type { RetryGroupStats, RetryStats } from './retry/retry-stats.js'

import type { HaOptions } from './ha/ha-options.js'
import type { HaStats } from './ha/ha-stats.js'
export type { BrokerRole, HaOptions } from './ha/ha-options.js'
export type { HaClosedConnection, HaConnectionStats, HaSlaveStats, HaStats } from './ha/ha-stats.js'
export type { PutMessageStatus } from './commitlog/commit-log.js'
export { PutMessageResult } from './commitlog/commit-log.js'
export type { HostAddress } from './commitlog/record.js'
export type { RecoveryDamage, RecoveryOutcome } from './commitlog/commit-log.js'

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
  /**
   * Deliver later: RocketMQ's delay level (1-based into `messageDelayLevel`; clamped to its last
   * level; 0 = no delay). Same as a `DELAY` property; this field wins when both are given.
   */
  delayTimeLevel?: number
  /**
   * Deliver at this time (epoch ms; RocketMQ 5's TIMER_DELIVER_MS), at most 7 days ahead; a time
   * in the past is delivered at once. Not together with `delayMs` or a delay level.
   */
  deliverAt?: number
  /** Deliver this many ms after the put (RocketMQ 5's TIMER_DELAY_MS); same rules as `deliverAt`. */
  delayMs?: number
}

/** A stored message as returned: RocketMQ MessageExt's fields, read-only. */
export type MessageExt = Readonly<DecodedMessage>

/**
 * What getMessage found (RocketMQ's GetMessageStatus). `nextBeginOffset` says where to read next
 * in every case:
 * - `FOUND`: at least one message; next is after the last unit looked at.
 * - `NO_MATCHED_MESSAGE`: units were looked at but none passed the filter; next is after them.
 * - `MESSAGE_WAS_REMOVING`: the commit-log data behind a unit was deleted by retention; next is
 *   after it.
 * - `OFFSET_FOUND_NULL`: no consume-queue file holds the offset; next is the first offset of the
 *   next file.
 * - `OFFSET_OVERFLOW_BADLY`: offset > the queue's max; next is max.
 * - `OFFSET_OVERFLOW_ONE`: offset == max, the reader has caught up; next is the same offset.
 * - `OFFSET_TOO_SMALL`: offset < the queue's min (deleted by retention); next is min.
 * - `NO_MATCHED_LOGIC_QUEUE`: RocketMQ's status for a queue it does not know; kept for
 *   compatibility, this store answers an unknown queue with NO_MESSAGE_IN_QUEUE.
 * - `NO_MESSAGE_IN_QUEUE`: the queue is empty or unknown; next is 0.
 */
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
  readonly status: GetMessageStatus
  readonly messages: readonly MessageExt[]
  readonly nextBeginOffset: number
  readonly minOffset: number
  readonly maxOffset: number
  /** Total bytes of the records returned. */
  readonly bufferTotalSize: number
  readonly suggestPullingFromSlave: boolean
  /**
   * Records of this read not served because their body failed its CRC (checkCRCOnRead); the
   * read moved past them, and nextBeginOffset is after them.
   */
  readonly bodyCrcFailures: number
}

/** A tag subscription: a list of tags, an expression "a || b", or '*' / undefined for all. */
export type MessageFilter = { readonly tags?: readonly string[] | string } | readonly string[] | string

/** What queryMessage found: the newest matches, oldest first (commit-log order). */
export interface QueryMessageResult {
  readonly messages: readonly MessageExt[]
  readonly indexLastUpdateTimestamp: number
  readonly indexLastUpdatePhyoffset: number
  /** Records the index led to that were not served because their body failed its CRC. */
  readonly bodyCrcFailures: number
}

export interface ConsumeOptions {
  group: string
  topic: string
  /**
   * The queue to read. Without it, every queue of the topic is read (its read queue count when the
   * topic was created, else the queues it has), each from its own offset: see TopicSubscription.
   */
  queueId?: number
  /**
   * Where to start: the group's committed offset (default), the queue's min or max, or an offset
   * (one queue only).
   */
  from?: 'committed' | 'earliest' | 'latest' | number
  /** Tags to keep: any shape getMessage's filter takes (`['a', 'b']`, `'a || b'`, `'*'`, `{ tags }`). */
  tags?: MessageFilter
  signal?: AbortSignal
  /** Commit after every message handed out (default false: call `commit()` yourself). */
  autoCommit?: boolean
  /**
   * Messages fetched per read (default 128), within maxTransferBytesOnMessageInMemory; unlike
   * getMessage's maxMsgNums, not capped by maxTransferCountOnMessageInMemory.
   */
  batchSize?: number
  /**
   * Topic subscriptions: how many times a message may be nacked back to the group's retry topic
   * before a nack sends it to the dead-letter queue `%DLQ%<group>` (RocketMQ's 16).
   */
  maxReconsumeTimes?: number
}

/** How a nacked message is retried. */
export interface NackOptions {
  /**
   * The delay level of the retry (default 0: level 3 + the message's reconsumeTimes, RocketMQ's
   * back-off). Negative: straight to the dead-letter queue.
   */
  delayLevel?: number
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

/** An async iterable over every queue of a topic; see MessageStore.consume without a queueId. */
export interface TopicSubscription extends AsyncIterable<MessageExt> {
  /** Per queue id, the queue offset after the last message of that queue handed out. */
  readonly positions: ReadonlyMap<number, number>
  /**
   * Commits every queue's position as the group's offset for that queue. Durable by default, as
   * Subscription.commit.
   */
  commit(options?: CommitOptions): Promise<void>
  /**
   * Sends a message this subscription handed out back for a later retry (RocketMQ's send-back):
   * to `%RETRY%<group>` with a delay level, read again by this group's topic subscriptions with
   * `reconsumeTimes` one higher; after `maxReconsumeTimes` retries, to `%DLQ%<group>`. Resolves
   * with the put's result once stored; rejects (MQStoreError) when the put is refused. The next
   * durable commit() waits until every nacked message is on disk.
   */
  nack(message: MessageExt, options?: NackOptions): Promise<PutMessageResult>
}

/** A topic as listTopics() reports it. */
export interface TopicInfo {
  readonly topic: string
  /** Queues consume() without a queueId reads. */
  readonly readQueueNums: number
  /** Queues puts without a queueId spread over. */
  readonly writeQueueNums: number
  /** False for a topic that only has queues (puts named its queue ids; it was never created). */
  readonly created: boolean
}

/** 'debug' carries the reason of every refused put; the others what the store repaired or noticed. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error'

export interface OpenOptions extends MessageStoreOptions, HaOptions {
  /** false (the default) opens the store for writing; `true` opens a reader (ReadOnlyOpenOptions). */
  readOnly?: false
  /**
   * Where the store tells what it repaired or noticed at open and while running: a function
   * `(level, message)`, or a pino-compatible logger (debug, info, warn and error methods;
   * `child({ component })` is called once per service when present). Silent when absent.
   */
  logger?: Logger
  /** Called while open() scans the commit log after a crash (about every 64 MiB, and at the end). */
  onProgress?: (progress: { phase: 'recover'; scannedBytes: number; totalBytes: number }) => void
  /**
   * Topic settings applied at open over those persisted in config/topics.json (same shape as
   * setTopicConfig): `{ orders: { cleanupPolicy: 'compact' } }`.
   */
  topics?: Record<string, TopicConfigInput>
  /** The compaction cleaner: offset-map memory, I/O rate limit, backoff, slice length, automatic passes. */
  compaction?: CompactionOptions
  /**
   * Listen on a UNIX domain socket in the store directory (`writer.sock`, owner only) for
   * producers in other processes: MessageStore.connect(dir). Default false.
   */
  shareWrites?: boolean
  /** @internal The clock policies read (retention, compaction lags); the real clock by default. */
  clock?: Clock
  /** @internal Where disk usage is read from; `fs.statfs` by default. */
  diskUsage?: DiskUsageSource
}

/** What MessageStore.connect() takes. */
export interface ConnectOptions {
  /** How long connect() waits for a writer to answer before it rejects (ms, default 10,000). */
  timeoutMs?: number
  /** Where the producer tells of lost and restored connections; the same forms as open()'s. */
  logger?: Logger
}

/** The `sharing` section of stats() in a writer opened with `{ shareWrites: true }`. */
export interface SharingStats {
  /** The socket producers connect to (MessageStore.connect). */
  readonly socketPath: string
  /** Producers connected now. */
  readonly connectedProducers: number
  /** Connections accepted since open. */
  readonly connectionsTotal: number
  /** Messages producers forwarded to this writer since open (whatever their status). */
  readonly forwardedPuts: number
  /** PUT frames (batches) received since open. */
  readonly forwardedBatches: number
  /** Connections closed because they sent a malformed or oversized frame. */
  readonly badFrames: number
}

/** The logger option's function form: called with a level and one sentence. */
export type LogFunction = (level: LogLevel, message: string) => void

/**
 * A pino-compatible logger: one method per level, each called with the message alone, and an
 * optional `child(bindings)` that the store calls once per service with `{ component }`.
 */
export interface LevelLogger {
  debug(message: string): void
  info(message: string): void
  warn(message: string): void
  error(message: string): void
  child?(bindings: { component: string }): LevelLogger
}

export type Logger = LogFunction | LevelLogger

/** A repair that open() or a running store made, as stats() lists them. */
export interface Repair {
  readonly action: string
  readonly reason: string
}

/** What stats() returns: the counters and rates of StoreStats plus the store's state. */
export interface MessageStoreStats extends Readonly<StoreStats> {
  readonly commitLogMinOffset: number
  readonly commitLogMaxOffset: number
  readonly commitLogFlushedOffset: number
  /** With the transient store pool: bytes in write buffers not yet committed to the files (else 0). */
  readonly commitBehindBytes: number
  /** Bytes appended but not yet flushed to disk (commitLogMaxOffset - commitLogFlushedOffset). */
  readonly flushBehindBytes: number
  readonly dispatchBehindBytes: number
  /** True while dispatch is stopped at a record it could not index (puts are refused meanwhile). */
  readonly dispatchStuck: boolean
  readonly lastExitOK: boolean
  readonly recovery: RecoveryOutcome | null
  readonly repairs: readonly Repair[]
  readonly consumeQueueCount: number
  readonly indexFileCount: number
  /** Usage of the partitions holding the commit log and the consume queues, as cleanup last read it. */
  readonly diskUsage: readonly DiskReading[]
  /** RocketMQ's RunningFlags: the bits (`value`) and each flag set, with why and since when. */
  readonly runningFlags: { readonly value: number; readonly flags: readonly RunningFlagState[] }
  /** Retention: files and bytes deleted, the last pass and its reason. */
  readonly cleanup: Omit<CleanupStats, 'diskUsage'>
  /** Records reads refused since open because their body failed its CRC (checkCRCOnRead). */
  readonly bodyCrcFailures: number
  /** The compaction cleaner's measurements (Kafka's LogCleaner gauges, per store). */
  readonly compaction: CleanerStats
  /**
   * Files mapped within the mapping budget right now (`mappedBytes`, `mappedFiles`: consume-queue
   * and index files, commit-log files other than the one being written, sealed compaction-log
   * files), and the maps and idle unmaps so far.
   */
  readonly mapping: { budgetBytes: number; mappedBytes: number; mappedFiles: number; maps: number; unmaps: number }
  /** Descriptors held open between system calls (process-wide cache) and descriptors opened in all. */
  readonly descriptors: { cached: number; opened: number }
  /** Shared writes (`shareWrites`): the socket, producers connected, puts forwarded; null when off. */
  readonly sharing: SharingStats | null
  /**
   * Touches of the store's `arrivals` file since open, which wake readers in other processes:
   * at most one per dispatch pass that wrote units, and at most one a millisecond.
   */
  readonly arrivalSignals: number
  /** Delayed messages: pending per level, next due time, delivered, lag (schedule-service.ts). */
  readonly schedule: ScheduleStats
  /** Messages put with a delivery time (deliverAt / delayMs / RocketMQ 5's TIMER_* properties). */
  readonly timer: TimerStats
  /** Nacks per consumer group since open: retried, or sent to the dead-letter queue. */
  readonly retry: RetryStats
  /** Replication: the role; a master's port and slaves; a slave's master and lag (docs/api.md, "Replication"). */
  readonly ha: HaStats
}
