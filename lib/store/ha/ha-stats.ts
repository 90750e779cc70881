// The shapes of stats().ha (documented in docs/api.md, "Replication").
import type { BrokerRole } from './ha-options.js'

/** The master's view of one slave, as stats().ha lists it. */
export interface HaConnectionStats {
  readonly peer: string
  /** The offset the slave last reported (its commit-log max offset); -1 before its first report. */
  readonly ackOffset: number
  /** The next offset the master sends it; -1 before its first report. */
  readonly transferOffset: number
  /** The master's max offset minus ackOffset (bytes the slave lacks); -1 before its first report. */
  readonly lagBytes: number
  /** Bytes written to the socket but not yet taken by the kernel: at most one frame (a slow slave holds back the next). */
  readonly queuedBytes: number
}

/** A connection the master closed or lost, with why (the newest few are kept for stats()). */
export interface HaClosedConnection {
  readonly peer: string
  readonly reason: string
  readonly at: number
}

/**
 * Where a slave's link stands: connecting (or waiting to reconnect), verifying (comparing its own
 * log with a new master's), replicating, refused (it holds bytes the master lacks; it stays so
 * until setBrokerRole), diskFull (an append found no space; it retries until there is).
 */
export type HaSlaveStatus = 'connecting' | 'verifying' | 'replicating' | 'refused' | 'diskFull'

/** A slave's side of stats().ha. */
export interface HaSlaveStats {
  readonly masterAddress: string
  readonly status: HaSlaveStatus
  readonly connected: boolean
  /** Why the slave is not connected (the last failure), or null while connected or before the first try. */
  readonly notConnectedReason: string | null
  /** The end of the last frame received (the next offset it expects), -1 before the first. */
  readonly lastOffsetReceived: number
  /** The master's next transfer offset (from its last frame) minus the slave's max offset, -1 before the first frame. */
  readonly lagBytes: number
  /** Reconnections since open, across role changes (as stats().ha.reconnects). */
  readonly reconnects: number
}

/** stats().ha */
export interface HaStats {
  readonly role: BrokerRole
  /** A listening master's host and bound port; null otherwise. */
  readonly host: string | null
  readonly port: number | null
  /** A master's slaves: peer, acknowledged offset, lag in bytes. */
  readonly connections: readonly HaConnectionStats[]
  /** The newest connections the master closed or lost, with why. */
  readonly closedConnections: readonly HaClosedConnection[]
  /** The best offset a slave acknowledged since open (0 before any). */
  readonly slaveAckOffset: number
  /** A slave's link to its master; null on a master. */
  readonly slave: HaSlaveStats | null
  /** Reconnections of the store's slave links since open (every link it ran, across role changes). */
  readonly reconnects: number
}
