// A master's HA port (RocketMQ's AcceptSocketService): accepts any number of slaves, each served
// by its own HaConnection, and keeps what SYNC_MASTER puts wait on: the best offset a slave acked.
import * as net from 'node:net'
import { MQStoreError } from '../../errors.js'
import type { CommitLog } from '../commitlog/commit-log.js'
import type { StoreLog } from '../store-logger.js'
import { HaConnection } from './ha-connection.js'
import type { HaClosedConnection, HaConnectionStats } from './ha-stats.js'
import type { HaConfig } from './ha-options.js'

const CLOSED_KEPT = 16

export class HaMaster {
  private server: net.Server | null = null
  readonly connections = new Set<HaConnection>()
  readonly closedConnections: HaClosedConnection[] = []
  /** The highest offset any slave acknowledged since open (RocketMQ's push2SlaveMaxOffset); never decreases. */
  slaveAckOffset = 0
  port = -1

  constructor(
    private readonly commitLog: CommitLog,
    private readonly config: HaConfig,
    private readonly log: StoreLog,
    private readonly onAck: (offset: number) => void,
  ) {}

  /** Listens on haListenHost:haListenPort; resolves with the bound port. */
  async listen(): Promise<number> {
    const server = net.createServer((socket) => this.accept(socket))
    this.server = server
    const where = `${this.config.haListenHost}:${this.config.haListenPort}`
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error) => reject(new MQStoreError('IO_ERROR', `cannot listen for slaves on ${where}: ${error.message}`)))
      server.listen({ host: this.config.haListenHost, port: this.config.haListenPort ?? 0, exclusive: true }, () => {
        server.removeAllListeners('error')
        resolve()
      })
    })
    server.on('error', (error) => this.log('error', `HA listener: ${error.message}`))
    this.port = (server.address() as net.AddressInfo).port
    this.log('info', `listening for slaves on ${this.config.haListenHost}:${this.port}`)
    return this.port
  }

  /** Slaves that reported at least once (RocketMQ counts connections; one that never spoke acks nothing). */
  get reportingSlaves(): number {
    let count = 0
    for (const connection of this.connections) if (connection.ackOffset >= 0) count++
    return count
  }

  /** New bytes in the commit log: idle senders look again. */
  notify(): void {
    for (const connection of this.connections) connection.notify()
  }

  stats(): HaConnectionStats[] {
    return [...this.connections].map((connection) => connection.stats())
  }

  async close(): Promise<void> {
    const server = this.server
    this.server = null
    for (const connection of [...this.connections]) connection.close('the store is closing')
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  private accept(socket: net.Socket): void {
    const peer = `${socket.remoteAddress}:${socket.remotePort}`
    const allowed = this.config.haAllowedAddresses
    if (allowed !== null && !allowed.includes(normalise(socket.remoteAddress ?? ''))) {
      socket.destroy()
      this.closed(peer, `${socket.remoteAddress} is not in haAllowedAddresses`)
      return
    }
    if (this.server === null) {
      socket.destroy()
      return
    }
    const connection = new HaConnection(socket, this.commitLog, this.config, {
      onAck: (acked) => {
        if (acked.ackOffset > this.slaveAckOffset) this.slaveAckOffset = acked.ackOffset
        this.onAck(this.slaveAckOffset)
      },
      onClose: (closed, reason) => {
        this.connections.delete(closed)
        this.closed(closed.peer, reason)
      },
    })
    this.connections.add(connection)
    this.log('info', `slave ${peer} connected`)
  }

  private closed(peer: string, reason: string): void {
    this.closedConnections.push({ peer, reason, at: Date.now() })
    if (this.closedConnections.length > CLOSED_KEPT) this.closedConnections.shift()
    this.log('warn', `closed the connection of slave ${peer}: ${reason}`)
  }
}

/** An IPv4 peer on a dual-stack socket shows as ::ffff:a.b.c.d. */
function normalise(address: string): string {
  return address.startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address
}
