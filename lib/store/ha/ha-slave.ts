// A slave's link to its master (RocketMQ's HAClient): reports its commit-log max offset at
// connect, every haSendHeartbeatInterval and after each batch it appended; checks each frame's
// offset against its own end and appends the bytes; reconnects with backoff when the link ends.
import * as net from 'node:net'
import type { CommitLog } from '../commitlog/commit-log.js'
import type { StoreLog } from '../store-logger.js'
import type { HaConfig } from './ha-options.js'
import { encodeReport, FrameReader, MAX_FRAME_BODY_BYTES } from './ha-protocol.js'
import type { HaSlaveStats } from './ha-stats.js'

const FIRST_BACKOFF_MS = 100
const MAX_BACKOFF_MS = 5_000

export class HaSlave {
  private socket: net.Socket | null = null
  private connected = false
  private stopped = false
  private reason: string | null = null
  private lastReceived = -1
  private masterNext = -1
  private reconnects = 0
  private backoff = FIRST_BACKOFF_MS
  private reported = -1
  private lastReadAt = 0
  private timer: NodeJS.Timeout | null = null
  private reconnectTimer: NodeJS.Timeout | null = null
  private readonly address: string

  constructor(
    private readonly commitLog: CommitLog,
    private readonly config: HaConfig,
    private readonly log: StoreLog,
    /** Bytes were appended: dispatch them. */
    private readonly onAppended: () => void,
  ) {
    const master = config.haMasterAddress as { host: string; port: number }
    this.address = `${master.host.includes(':') ? `[${master.host}]` : master.host}:${master.port}`
  }

  start(): void {
    this.connect()
  }

  stats(): HaSlaveStats {
    return {
      masterAddress: this.address,
      connected: this.connected,
      notConnectedReason: this.connected ? null : this.reason,
      lastOffsetReceived: this.lastReceived,
      lagBytes: this.masterNext < 0 ? -1 : Math.max(0, this.masterNext - this.commitLog.getMaxOffset()),
      reconnects: this.reconnects,
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer)
    const socket = this.socket
    this.drop('the store is closing')
    if (socket !== null && !socket.destroyed) await new Promise<void>((resolve) => socket.once('close', () => resolve()))
  }

  private connect(): void {
    if (this.stopped) return
    const master = this.config.haMasterAddress as { host: string; port: number }
    const socket = net.connect({ host: master.host, port: master.port, noDelay: true })
    this.socket = socket
    const frames = new FrameReader(MAX_FRAME_BODY_BYTES)
    socket.once('connect', () => {
      this.connected = true
      this.backoff = FIRST_BACKOFF_MS
      this.lastReadAt = Date.now()
      this.log('info', `connected to master ${this.address}`)
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

  private report(always: boolean): void {
    const max = this.commitLog.getMaxOffset()
    if (this.socket === null || !this.connected || (!always && max === this.reported)) return
    this.reported = max
    this.socket.write(encodeReport(max))
  }

  private onData(socket: net.Socket, frames: FrameReader, chunk: Buffer): void {
    if (socket !== this.socket) return
    this.lastReadAt = Date.now()
    frames.add(chunk)
    let appended = false
    for (;;) {
      const frame = frames.next((offset) => this.checkFrame(offset))
      if (frame === null) break
      if (frame instanceof Error) {
        this.drop(frame.message)
        return
      }
      this.masterNext = frame.offset + frame.body.length
      if (frame.body.length === 0) continue
      const refused = this.commitLog.appendRaw(frame.offset, frame.body)
      if (refused !== null) {
        this.drop(`cannot append ${frame.body.length} bytes at ${frame.offset}: ${refused}`)
        return
      }
      this.lastReceived = frame.offset + frame.body.length
      appended = true
    }
    if (appended) {
      this.onAppended()
      this.report(false)
    }
  }

  /** RocketMQ's frame check: a frame must start at the slave's end (any offset for an empty slave). */
  private checkFrame(offset: number): string | null {
    const max = this.commitLog.getMaxOffset()
    if (max !== 0 && offset !== max) return `frame offset ${offset} differs from the slave's max offset ${max}`
    return null
  }

  /** Ends the connection (if any) with why, and tries again after a backoff unless stopped. */
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
    if (this.stopped) return
    this.log('warn', `replication from ${this.address} stopped: ${reason}; retrying in ${this.backoff} ms`)
    this.reconnects++
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null
      this.connect()
    }, this.backoff)
    this.reconnectTimer.unref()
    this.backoff = Math.min(MAX_BACKOFF_MS, this.backoff * 2)
  }
}
