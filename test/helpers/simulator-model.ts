// The simulator's model of one message, and what its step modules (simulator-queues.ts,
// simulator-retention.ts, simulator-compaction.ts) use of the simulation.
import type { MessageExt, MessageStore } from '../../lib/index.js'
import type { PowerLossDisk } from './power-loss.js'
import type { SimulationReport } from './simulator.js'

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
