// A slave's link to its master (RocketMQ's HAClient): reports its commit-log max offset at
// connect, every haSendHeartbeatInterval and after each batch it appended; checks each frame's
// offset against its own end and appends the bytes; reconnects with backoff when the link ends.
// A slave whose log already holds bytes from another master (setBrokerRole) first compares its
// tail with the new master's before it appends anything (see SlaveVerify).
import { Buffer } from 'node:buffer'
import * as net from 'node:net'
import type { CommitLog } from '../commitlog/commit-log.js'
import type { StoreLog } from '../store-logger.js'
import { boundaryAtOrBefore, lastRecordBoundary, nextBoundary } from './ha-log-cut.js'
import { formatAddress, type HaConfig } from './ha-options.js'
import { encodeReport, FrameReader, MAX_FRAME_BODY_BYTES } from './ha-protocol.js'
import type { HaSlaveStats, HaSlaveStatus } from './ha-stats.js'

const FIRST_BACKOFF_MS = 100
const MAX_BACKOFF_MS = 5_000
/** The tail a joining slave first compares with its master's; doubled while no byte matches. */
const FIRST_PROBE_BYTES = 64 * 1024

/**
 * A slave that joins a master with a log of its own: the protocol carries no history, so before
 * it appends, the slave asks for bytes it already has and compares them. Where they differ (or
 * where the master's log ends first) the slave holds bytes the master lacks: it refuses, or with
 * `truncateToMaster` cuts its log back to the last record boundary they share.
 */
export interface SlaveVerify {
  readonly truncateToMaster: boolean
  /** Cuts the commit log, queues, index and compaction logs back to `offset`, a record boundary. */
  truncate(offset: number): Promise<void>
}

export class HaSlave {
  private socket: net.Socket | null = null
  private connected = false
  private stopped = false
  private reason: string | null = null
  /** Why the link stopped for good: the slave holds bytes the master does not have. */
  private refused: string | null = null
  private diskFull = false
  private lastReceived = -1
  private masterNext = -1
  private reconnects = 0
  private backoff = FIRST_BACKOFF_MS
  private reported = -1
  private lastReadAt = 0
  private timer: NodeJS.Timeout | null = null
  private reconnectTimer: NodeJS.Timeout | null = null
  private readonly address: string
  /** While verifying: the offset reported, the next offset to compare, and the next probe's size. */
  private verifying: boolean
  private probeFrom = -1
  private probeAt = -1
  private probeBytes = FIRST_PROBE_BYTES
  /** A truncateToMaster cut under way (the link waits for it; stop too). */
  private cutting: Promise<void> | null = null

  constructor(
    private readonly commitLog: CommitLog,
    private readonly config: HaConfig,
    private readonly log: StoreLog,
    /** Bytes were appended: dispatch them. */
    private readonly onAppended: () => void,
    private readonly verify: SlaveVerify | null = null,
  ) {
    this.address = formatAddress(config.haMasterAddress)
    const max = commitLog.getMaxOffset()
    this.verifying = verify !== null && max > Math.max(0, commitLog.getMinOffset())
    if (this.verifying) this.probeFrom = Math.max(this.probeFloor(), boundaryAtOrBefore(commitLog, max - FIRST_PROBE_BYTES))
  }

  start(): void {
    this.connect()
  }

  get status(): HaSlaveStatus {
    if (this.refused !== null) return 'refused'
    if (this.diskFull) return 'diskFull'
    if (!this.connected) return 'connecting'
    return this.verifying ? 'verifying' : 'replicating'
  }

  stats(): HaSlaveStats {
    return {
      masterAddress: this.address,
      status: this.status,
      connected: this.connected,
      notConnectedReason: this.connected ? null : (this.refused ?? this.reason),
      lastOffsetReceived: this.lastReceived,
      lagBytes: this.lagBytes(),
      reconnects: this.reconnects,
    }
  }

  lagBytes(): number {
    return this.masterNext < 0 ? -1 : Math.max(0, this.masterNext - this.commitLog.getMaxOffset())
  }

  get reconnectCount(): number {
    return this.reconnects
  }

  async stop(): Promise<void> {
    this.stopped = true
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer)
    const socket = this.socket
    this.drop('the store is closing')
    if (socket !== null && !socket.destroyed) await new Promise<void>((resolve) => socket.once('close', () => resolve()))
    await this.cutting
  }

  private connect(): void {
    if (this.stopped || this.refused !== null) return
    const master = this.config.haMasterAddress as { host: string; port: number }
    const socket = net.connect({ host: master.host, port: master.port, noDelay: true })
    this.socket = socket
    const frames = new FrameReader(MAX_FRAME_BODY_BYTES)
    socket.once('connect', () => {
      this.connected = true
      this.lastReadAt = Date.now()
      this.probeAt = this.probeFrom
      this.log('info', `connected to master ${this.address}${this.verifying ? `; comparing the log from offset ${this.probeFrom}` : ''}`)
      this.report(true)
      const every = Math.min(this.config.haSendHeartbeatInterval, 1_000)
      this.timer = setInterval(() => this.tick(), every)
      this.timer.unref()
    })
    let heard = false
    socket.on('data', (chunk: Buffer) => {
      heard = true
      this.onData(socket, frames, chunk)
    })
    // A late event of a socket already replaced must not end its successor.
    socket.on('error', (error) => {
      if (socket === this.socket) this.drop(`cannot reach master ${this.address}: ${error.message}`)
    })
    socket.on('close', () => {
      if (socket !== this.socket) return
      // The protocol carries no reason: a master that closes before any frame refused the offset asked for.
      const refused = this.connected && !heard && this.reported >= 0
      this.drop(
        refused
          ? `master ${this.address} closed the connection without sending a frame for offset ${this.reported}: it no longer has those bytes (deleted by retention) or never had them, or it does not accept this address (haAllowedAddresses); its stats().ha.closedConnections says which`
          : `master ${this.address} closed the connection`,
      )
    })
  }

  /** Heartbeat reports; a master that sent nothing for haHousekeepingInterval is dropped. */
  private tick(): void {
    const idle = Date.now() - this.lastReadAt
    if (idle > this.config.haHousekeepingInterval) {
      this.drop(`nothing read from master ${this.address} for ${idle} ms (haHousekeepingInterval)`)
      return
    }
    this.report(true)
  }

  /** Reports the max offset; while verifying, the probe's start (the master sends from there). */
  private report(always: boolean): void {
    const max = this.verifying ? this.probeFrom : this.commitLog.getMaxOffset()
    if (this.socket === null || !this.connected || (!always && max === this.reported)) return
    this.reported = max
    this.socket.write(encodeReport(max))
  }

  private onData(socket: net.Socket, frames: FrameReader, chunk: Buffer): void {
    if (socket !== this.socket) return
    this.lastReadAt = Date.now()
    frames.add(chunk)
    let appended = false
    try {
      for (;;) {
        const frame = frames.next((offset) => this.checkFrame(offset))
        if (frame === null) break
        if (frame instanceof Error) {
          this.drop(frame.message)
          return
        }
        let { offset, body } = frame
        // Only a master that answers with frames resets the backoff: one that accepts and closes
        // at once (it does not take this address, or lacks the offset) is retried ever more slowly.
        this.backoff = FIRST_BACKOFF_MS
        if (this.verifying) {
          const rest = this.compare(offset, body)
          if (rest === null) return
          if (this.verifying) continue
          offset = this.commitLog.getMaxOffset()
          body = rest
        }
        const max = this.commitLog.getMaxOffset()
        if (offset < max) {
          this.belowEnd(offset, `master ${this.address} sends offset ${offset}, below the slave's end ${max}`)
          return
        }
        this.masterNext = offset + body.length
        if (body.length === 0) continue
        const refused = this.commitLog.appendRaw(offset, body)
        if (refused !== null) {
          appended ||= this.commitLog.getMaxOffset() > max
          this.appendFailed(offset, body.length, refused)
          return
        }
        this.diskFull = false
        this.lastReceived = offset + body.length
        appended = true
      }
    } finally {
      if (appended) {
        this.onAppended()
        this.report(false)
      }
    }
  }

  /** RocketMQ's frame check: a frame must not start past the slave's end (any offset for an empty slave). */
  private checkFrame(offset: number): string | null {
    const max = this.commitLog.getMaxOffset()
    if (this.verifying || max === 0 || offset <= max) return null
    return `frame offset ${offset} differs from the slave's max offset ${max}`
  }

  private appendFailed(offset: number, bytes: number, why: string): void {
    const noSpace = /ENOSPC|no space/i.test(why)
    if (noSpace && !this.diskFull)
      this.log(
        'error',
        `the disk is full: cannot append ${bytes} replicated bytes at ${offset}; replication resumes once there is space (${why})`,
      )
    this.diskFull = noSpace
    this.drop(`cannot append ${bytes} bytes at ${offset}: ${why}`)
  }

  /**
   * One frame while verifying: compares its bytes with the slave's own. Returns the bytes past
   * the slave's end once everything up to it matched (verifying is then over), an empty buffer
   * while the comparison goes on, or null when the connection was ended (a new probe, a refusal).
   */
  private compare(offset: number, body: Buffer): Buffer | null {
    const max = this.commitLog.getMaxOffset()
    const at = this.probeAt
    if (offset !== at) {
      if (at === this.probeFrom && offset < at) {
        // The master ends below the probe (an mqstore master says where with a heartbeat).
        this.probeBelow(offset, `the master's log ends at ${offset}`)
      } else {
        this.drop(`frame offset ${offset} differs from ${at}, where the comparison with the master stands`)
      }
      return null
    }
    if (body.length === 0) {
      this.settle(at, `the master's log ends at ${at}`)
      return null
    }
    const length = Math.min(body.length, max - at)
    const differs = this.firstDifference(at, body.subarray(0, length))
    if (differs >= 0) {
      this.settle(at + differs, `the bytes at ${at + differs} differ from the master's`)
      return null
    }
    this.probeAt = at + length
    if (this.probeAt < max) return Buffer.alloc(0)
    this.verifying = false
    this.log('info', `the commit log matches master ${this.address} from ${this.probeFrom} to its end ${max}; replicating`)
    return body.subarray(length)
  }

  /** The index of the first byte of `bytes` that differs from the commit log at `offset`, or -1. */
  private firstDifference(offset: number, bytes: Buffer): number {
    let done = 0
    while (done < bytes.length) {
      const view = this.commitLog.getData(offset + done, false)
      if (view === null) return done
      try {
        const length = Math.min(view.size, bytes.length - done)
        if (length === 0) return done
        const mine = view.buffer.subarray(0, length)
        if (!mine.equals(bytes.subarray(done, done + length))) {
          for (let i = 0; i < length; i++) if (mine[i] !== bytes[done + i]) return done + i
        }
        done += length
      } finally {
        view.release()
      }
    }
    return -1
  }

  /**
   * The logs part at `where` (a differing byte, or the master's end). Only whole records count as
   * shared: a few equal bytes of two different records prove nothing. When not even the probe's
   * first record matched, the logs may have parted earlier: the comparison starts further back.
   */
  private settle(where: number, why: string): void {
    const shared = lastRecordBoundary(this.commitLog, this.probeFrom, where)
    if (shared > this.probeFrom) this.diverged(shared, why)
    else this.probeBelow(this.probeFrom, why)
  }

  /**
   * The lowest offset a probe may report, a record boundary: the log's start, or for a log
   * starting at 0 the end of its first record (a report of 0 asks for the master's last file).
   */
  private probeFloor(): number {
    const min = Math.max(0, this.commitLog.getMinOffset())
    if (min > 0) return min
    const next = nextBoundary(this.commitLog, 0)
    return next < 0 ? this.commitLog.getMaxOffset() : next
  }

  /** Probes again from a record boundary below `below`, further back each time; gives up at the log's start. */
  private probeBelow(below: number, why: string): void {
    const floor = this.probeFloor()
    if (below <= floor) {
      const start = Math.max(0, this.commitLog.getMinOffset())
      this.diverged(start, `${why}, and no whole record of the slave's log from ${floor} on matches the master's`)
      return
    }
    this.probeFrom = Math.max(floor, boundaryAtOrBefore(this.commitLog, Math.max(floor, below - this.probeBytes)))
    this.probeBytes *= 2
    this.restart(`${why}; comparing again from ${this.probeFrom}`)
  }

  /**
   * A frame below the slave's end: the master lacks bytes the slave holds. A slave that joined by
   * setBrokerRole compares again (and may cut back); one opened as SLAVE refuses.
   */
  private belowEnd(offset: number, why: string): void {
    if (this.verify === null) {
      this.diverged(boundaryAtOrBefore(this.commitLog, offset), why)
      return
    }
    this.verifying = true
    this.probeFrom = this.commitLog.getMaxOffset()
    this.probeBytes = FIRST_PROBE_BYTES
    this.probeBelow(offset, why)
  }

  /**
   * The slave holds bytes the master does not have from the record boundary `cut` on: it refuses
   * (and truncates nothing), or with truncateToMaster cuts its log back there.
   */
  private diverged(cut: number, why: string): void {
    const max = this.commitLog.getMaxOffset()
    if (this.verify?.truncateToMaster !== true) {
      this.refused =
        `the slave's commit log holds ${max - cut} bytes from offset ${cut} to ${max} that master ${this.address} does not have (${why}); ` +
        "nothing was truncated: setBrokerRole('SLAVE', { haMasterAddress, truncateToMaster: true }) cuts them"
      this.log('error', `replication refused: ${this.refused}`)
      this.drop(this.refused)
      return
    }
    this.log('warn', `truncateToMaster: cutting the log back from ${max} to ${cut} to follow master ${this.address} (${why})`)
    this.verifying = false
    // No frame may arrive while the cut is under way: the link is down until it is done.
    const socket = this.socket
    this.socket = null
    this.connected = false
    this.reported = -1
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
    socket?.destroy()
    this.cutting = this.verify.truncate(cut).then(
      () => {
        this.cutting = null
        this.log('info', `the log was cut back to ${cut}; reconnecting to master ${this.address}`)
        this.connect()
      },
      (error: unknown) => {
        this.cutting = null
        this.refused = `cutting the log back to ${cut} failed: ${(error as Error)?.message ?? String(error)}`
        this.log('error', `replication stopped: ${this.refused}`)
      },
    )
  }

  /** Ends the connection and connects again at once (a new probe, or after a cut). */
  private restart(why: string): void {
    this.log('info', `reconnecting to master ${this.address}: ${why}`)
    this.backoff = 0
    this.drop(why)
  }

  /** Ends the connection (if any) with why, and tries again after a backoff unless stopped or refused. */
  private drop(reason: string): void {
    const socket = this.socket
    if (socket === null) return
    this.socket = null
    this.connected = false
    this.reason = reason
    this.reported = -1
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
    socket.destroy()
    if (this.stopped || this.refused !== null) return
    if (this.backoff > 0) this.log('warn', `replication from ${this.address} stopped: ${reason}; retrying in ${this.backoff} ms`)
    this.reconnects++
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null
      this.connect()
    }, this.backoff)
    this.reconnectTimer.unref()
    this.backoff = Math.min(MAX_BACKOFF_MS, Math.max(FIRST_BACKOFF_MS, this.backoff * 2))
  }
}
