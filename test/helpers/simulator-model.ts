// The simulator's store settings, its model of one message, and what its step modules
// (simulator-queues.ts, simulator-retention.ts, simulator-compaction.ts) use of the simulation.
import type { MessageExt, MessageStore, OpenOptions } from '../../lib/index.js'
import type { PowerLossDisk } from './power-loss.js'
import type { FlushMode, SimulationReport } from './simulator.js'
import { KV_TOPIC, KV_TOPIC_CONFIG } from './simulator-compaction.js'
import { SIM_RETENTION } from './simulator-retention.js'

/** Small files, so that every file type rolls within a short schedule. */
export function simulationStoreOptions(flushMode: FlushMode): OpenOptions {
  return {
    flushDiskType: flushMode,
    mappedFileSizeCommitLog: 32 * 1024,
    mappedFileSizeConsumeQueue: 20 * 64,
    maxHashSlotNum: 64,
    maxIndexNum: 256,
    flushIntervalCommitLog: 200,
    flushCommitLogThoroughInterval: 3_000,
    flushIntervalConsumeQueue: 700,
    flushConsumeQueueThoroughInterval: 5_000,
    flushConsumerOffsetInterval: 1_500,
    syncFlushTimeout: 60_000,
    // Retention passes are steps (simulator-retention.ts); the disk is a quiet one of its own, so
    // that the shared machine's disk usage (read through statfs) never starts a pass or refuses puts.
    ...SIM_RETENTION,
    // Compaction passes are steps too: automatic ones would run on real I/O between fake timers.
    topics: { [KV_TOPIC]: KV_TOPIC_CONFIG },
    compaction: { enabled: false, fileDeleteDelayMs: 1_000 },
    diskUsage: { usage: () => ({ totalBytes: 2 ** 40, availableBytes: 2 ** 39, usedRatio: 0.5 }) },
    // POWERCUT_STORE_LOG=1: the store's own log lines go to stderr, among the trace's.
    logger: process.env.POWERCUT_STORE_LOG ? (level, message) => process.stderr.write(`  store ${level}: ${message}\n`) : undefined,
  }
}

export interface ModelMessage {
  key: string
  topic: string
  queueId: number
  tags: string
  keys: string[]
  properties: Record<string, string>
  body: Buffer
  /** Set once the store answered the put. */
  wroteOffset: number
  wroteBytes: number
  queueOffset: number
  /** Must survive every failure from now on. */
  durable: boolean
  /** Acknowledged (PUT_OK) before the current power cut, if any. */
  acked: boolean
  /** In the store as far as the model knows (false once a reopen did not serve it). */
  present: boolean
  /** A message of the compacted topic (its reads go through the compaction model). */
  compacted?: boolean
  /** Simulated time of the put (tombstone horizons). */
  putMs?: number
}

/** What the retention and compaction steps use of the simulation. */
export interface SimHost {
  readonly store: MessageStore | null
  readonly storeDir: string
  readonly disk: PowerLossDisk | null
  readonly damaged: boolean
  readonly messages: Map<string, ModelMessage>
  readonly report: SimulationReport
  readonly topics: readonly string[]
  readonly queues: number
  random(): number
  int(n: number): number
  log(line: string): void
  check(ok: boolean, what: () => string): void
  matchServed(found: MessageExt): ModelMessage
  /** Takes a message retention deleted out of the model (it may come back unchanged after a cut). */
  retire(m: ModelMessage): void
  advanceClock(ms: number): Promise<unknown>
  jumpClock(ms: number): void
  afterOperation(): Promise<void>
}
