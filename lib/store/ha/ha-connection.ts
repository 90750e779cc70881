// One slave's connection on a master (RocketMQ's HAConnection): reads the slave's reports and
// sends it the commit log from where it asked, a frame at a time, each written once the socket
// handed the one before to the kernel (backpressure: a slow slave holds at most one frame in memory).
import { Buffer } from 'node:buffer'
import type { Socket } from 'node:net'
import type { CommitLog } from '../commitlog/commit-log.js'
import type { HaConfig } from './ha-options.js'
import { encodeFrameHeader, ReportReader } from './ha-protocol.js'
import type { HaConnectionStats } from './ha-stats.js'

export interface ConnectionEvents {
  /** The slave acknowledged `offset` (every report). */
  onAck(connection: HaConnection): void
  /** The connection ended; `reason` says why. */
  onClose(connection: HaConnection, reason: string): void
}

export class HaConnection {
  readonly peer: string
  ackOffset = -1
  private next = -1
  private closed = false
  private readonly reports = new ReportReader()
  private lastReadAt = Date.now()
  private lastWriteAt = 0
  private wake: (() => void) | null = null
  private readonly housekeeping: NodeJS.Timeout

  constructor(
    private readonly socket: Socket,
    private readonly commitLog: CommitLog,
    private readonly config: HaConfig,
    private readonly events: ConnectionEvents,
  ) {
    this.peer = `${socket.remoteAddress}:${socket.remotePort}`
    socket.setNoDelay(true)
    socket.on('data', (chunk: Buffer) => this.onData(chunk))
    socket.on('error', (error) => this.close(`socket error: ${error.message}`))
    socket.on('close', () => this.close('the slave closed the connection'))
    const every = Math.min(1_000, config.haHousekeepingInterval)
    this.housekeeping = setInterval(() => {
      const idle = Date.now() - this.lastReadAt
      if (idle > this.config.haHousekeepingInterval) {
        this.close(`nothing read for ${idle} ms (haHousekeepingInterval ${this.config.haHousekeepingInterval})`)
      }
    }, every)
    this.housekeeping.unref()
  }

  get isOpen(): boolean {
    return !this.closed
  }

  stats(): HaConnectionStats {
    const max = this.commitLog.getMaxOffset()
    return {
      peer: this.peer,
      ackOffset: this.ackOffset,
      transferOffset: this.next,
      lagBytes: this.ackOffset < 0 ? -1 : Math.max(0, max - this.ackOffset),
      queuedBytes: this.socket.writableLength,
    }
  }

  /** New bytes may be readable: a waiting sender looks again. */
  notify(): void {
    const wake = this.wake
    this.wake = null
    wake?.()
  }

  close(reason: string): void {
    if (this.closed) return
    this.closed = true
    clearInterval(this.housekeeping)
    this.socket.destroy()
    this.notify()
    this.events.onClose(this, reason)
  }

  private onData(chunk: Buffer): void {
    this.lastReadAt = Date.now()
    const offsets = this.reports.read(chunk)
    if (offsets instanceof Error) {
      this.close(offsets.message)
      return
    }
    if (offsets.length === 0) return
    const offset = offsets[offsets.length - 1]
    const max = this.commitLog.getMaxOffset()
    if (this.next < 0) {
      const start = this.startFor(offset)
      if (typeof start === 'string') {
        // A slave ahead of the master learns where the master ends (a heartbeat at its end), so
        // that it can refuse with why, or cut back there (setBrokerRole's truncateToMaster).
        if (offset > max) this.socket.write(encodeFrameHeader(max, 0))
        this.close(start)
        return
      }
      this.next = start
      void this.send()
    } else if (offset > max) {
      this.close(`the slave reports offset ${offset}, beyond the master's end ${max}`)
      return
    }
    this.ackOffset = offset
    this.events.onAck(this)
  }

  /**
   * Where the transfer starts for a first report: the slave's offset, or for 0 the start of the
   * master's last file (RocketMQ's rule: a new slave does not get the whole history). An offset
   * the master no longer has or never had is refused with why (RocketMQ's master would stall).
   */
  private startFor(offset: number): number | string {
    const max = this.commitLog.getMaxOffset()
    const min = this.commitLog.getMinOffset()
    const fileSize = this.commitLog.mappedFileQueue.mappedFileSize
    if (offset === 0) return max - (max % fileSize)
    if (offset > max) return `the slave asks for offset ${offset}, beyond the master's end ${max}`
    if (min < 0 || offset < min) {
      return `the slave asks for offset ${offset}, which the master no longer has (its commit log starts at ${min < 0 ? max : min})`
    }
    return offset
  }

  /** Sends frames while there are bytes, heartbeats while there are none, until the connection ends. */
  private async send(): Promise<void> {
    const batch = this.config.haTransferBatchSize
    const heartbeat = this.config.haSendHeartbeatInterval
    while (!this.closed) {
      const min = this.commitLog.getMinOffset()
      if (min > this.next) {
        // Retention deleted the file being sent: the slave can never get these bytes from here.
        this.close(`retention deleted the bytes the slave needs next (offset ${this.next}; the master's commit log now starts at ${min})`)
        return
      }
      const view = this.next < this.commitLog.getMaxOffset() ? this.commitLog.getData(this.next, false) : null
      if (view !== null) {
        let body: Buffer
        try {
          // A copy: the frame may wait in the socket while retention unmaps the file.
          body = Buffer.from(view.buffer.subarray(0, Math.min(view.size, batch)))
        } finally {
          view.release()
        }
        if (body.length > 0) {
          if (!(await this.write(this.next, body))) return
          this.next += body.length
          continue
        }
      }
      if (Date.now() - this.lastWriteAt >= heartbeat) {
        if (!(await this.write(this.next, null))) return
        continue
      }
      // Woken by a put (notify) or after a short wait, as RocketMQ's 100 ms.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.wake = null
          resolve()
        }, 100)
        this.wake = () => {
          clearTimeout(timer)
          resolve()
        }
      })
    }
  }

  /**
   * Writes one frame; resolves once the socket handed all of it to the kernel (false when the
   * connection ended). Waiting for 'drain' would not do: it comes only past the stream's high-water
   * mark, so a slow slave would hold that much more on the master besides the frame.
   */
  private write(offset: number, body: Buffer | null): Promise<boolean> {
    if (this.closed) return Promise.resolve(false)
    this.lastWriteAt = Date.now()
    const socket = this.socket
    return new Promise((resolve) => {
      const done = (): void => {
        socket.off('close', done)
        resolve(!this.closed)
      }
      socket.once('close', done)
      const header = encodeFrameHeader(offset, body === null ? 0 : body.length)
      if (body === null) socket.write(header, done)
      else {
        socket.write(header)
        socket.write(body, done)
      }
    })
  }
}
