// The writer's side of shared writes: a UNIX domain socket in the store directory where producers
// in other processes (MessageStore.connect) send PUT frames. Each frame's messages go through the
// writer's own put path, so they get the writer's checks, statuses and flush waits; the answer
// goes back as one RESULTS frame. A frame that breaks the protocol closes its connection before
// any of it reaches the put path.
import * as fs from 'node:fs'
import * as net from 'node:net'
import { randomBytes } from 'node:crypto'
import { basename, dirname, join } from 'node:path'

import { MQStoreError } from '../../errors.js'
import type { PutMessageResult } from '../commitlog/commit-log.js'
import type { HostAddress } from '../commitlog/record.js'
import type { StoreLog } from '../store-logger.js'
import type { Message, SharingStats } from '../types.js'
import { FrameError, FrameReader, FrameType, decodePut, encodeHello, encodeResults } from './frame.js'
import { socketAddress } from './socket-path.js'

/** PUT frames a connection may have in the put path at once; reading pauses beyond (backpressure). */
const MAX_PUTS_IN_FLIGHT = 64
/** How long close() lets puts in flight answer before it drops their connections. */
const CLOSE_GRACE_MS = 10_000

export interface ForwardingServerOptions {
  /** The socket's path (StorePaths.shareSocket). */
  socketPath: string
  maxFrameBytes: number
  storeHost: HostAddress
  /** The writer's put path (MessageStore.putMessages). */
  put: (messages: Message[]) => Promise<PutMessageResult[]>
  log: StoreLog
}

/** One producer's connection. */
class Connection {
  readonly reader: FrameReader
  inFlight = 0
  /** Set once the connection stops taking frames (closing, or a bad frame). */
  done = false

  constructor(
    readonly socket: net.Socket,
    maxFrameBytes: number,
  ) {
    this.reader = new FrameReader(maxFrameBytes)
  }
}

export class ForwardingServer {
  private readonly connections = new Set<Connection>()
  private closing: Promise<void> | null = null
  private drained: (() => void) | null = null
  private connectionsTotal = 0
  private forwardedPuts = 0
  private forwardedBatches = 0
  private badFrames = 0
  private readonly hello: Buffer

  private constructor(
    private readonly server: net.Server,
    private readonly options: ForwardingServerOptions,
  ) {
    this.hello = encodeHello({ maxFrameBytes: options.maxFrameBytes, storeHost: options.storeHost })
  }

  /**
   * Listens on `socketPath`, owner only. The caller holds the store lock, so a socket already
   * there was left by a writer that died: it is removed. The socket is bound under a random name,
   * made 0600 and only then renamed into place, so no other user can connect in between.
   */
  static async listen(options: ForwardingServerOptions): Promise<ForwardingServer> {
    const { socketPath } = options
    if (removeStaleSocket(socketPath)) options.log('warn', `shared writes: removed the socket a writer that died left at ${socketPath}`)
    const bindPath = join(dirname(socketPath), `.${basename(socketPath)}.${randomBytes(3).toString('hex')}`)
    const bindAddress = socketAddress(bindPath, 'shareWrites')
    socketAddress(socketPath, 'shareWrites')
    const server = net.createServer({ allowHalfOpen: true })
    const sharing = new ForwardingServer(server, options)
    server.on('connection', (socket) => sharing.accept(socket))
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      // exclusive: a writer in a cluster worker binds the socket itself, not through the primary.
      server.listen({ path: bindAddress, exclusive: true }, () => {
        server.off('error', reject)
        resolve()
      })
    })
    server.on('error', (error) => options.log('error', `shared-writes socket: ${error.message}`))
    try {
      fs.chmodSync(bindPath, 0o600)
      fs.renameSync(bindPath, socketPath)
    } catch (error) {
      server.close()
      fs.rmSync(bindPath, { force: true })
      throw new MQStoreError('IO_ERROR', `could not set up the shared-writes socket ${socketPath}: ${(error as Error).message}`, {
        cause: error,
      })
    }
    options.log('info', `shared writes: listening on ${socketPath}`)
    return sharing
  }

  stats(): SharingStats {
    return {
      socketPath: this.options.socketPath,
      connectedProducers: this.connections.size,
      connectionsTotal: this.connectionsTotal,
      forwardedPuts: this.forwardedPuts,
      forwardedBatches: this.forwardedBatches,
      badFrames: this.badFrames,
    }
  }

  private accept(socket: net.Socket): void {
    if (this.closing !== null) {
      socket.destroy()
      return
    }
    const connection = new Connection(socket, this.options.maxFrameBytes)
    this.connections.add(connection)
    this.connectionsTotal++
    socket.setNoDelay?.(true)
    socket.on('data', (chunk: Buffer) => this.received(connection, chunk))
    socket.on('end', () => {
      // The producer is done sending; answers to what it sent still go out, then the socket ends.
      if (connection.reader.pendingBytes > 0) {
        this.refuse(connection, `the connection ended inside a frame (${connection.reader.pendingBytes} bytes of it received)`)
        return
      }
      connection.done = true
      if (connection.inFlight === 0) socket.end()
    })
    socket.on('drain', () => this.afterAnswer(connection))
    socket.on('error', () => {
      // A producer that went away: 'close' follows and cleans up.
    })
    socket.on('close', () => {
      this.connections.delete(connection)
      this.checkDrained()
    })
    socket.write(this.hello)
  }

  private received(connection: Connection, chunk: Buffer): void {
    if (connection.done) return
    let frames: ReturnType<FrameReader['push']>
    try {
      frames = connection.reader.push(chunk)
    } catch (error) {
      this.refuse(connection, (error as Error).message)
      return
    }
    for (const frame of frames) {
      if (frame.type !== FrameType.PUT) {
        this.refuse(connection, `a frame of type ${frame.type} (a producer sends only PUT frames)`)
        return
      }
      let messages: Message[]
      try {
        messages = decodePut(frame.payload)
      } catch (error) {
        this.refuse(connection, error instanceof FrameError ? error.message : `undecodable PUT frame: ${(error as Error).message}`)
        return
      }
      this.forward(connection, frame.requestId, messages)
      if (connection.done) return
    }
  }

  private forward(connection: Connection, requestId: number, messages: Message[]): void {
    this.forwardedBatches++
    this.forwardedPuts += messages.length
    connection.inFlight++
    if (connection.inFlight >= MAX_PUTS_IN_FLIGHT) connection.socket.pause()
    let answer: Promise<PutMessageResult[]>
    try {
      answer = this.options.put(messages)
    } catch (error) {
      answer = Promise.reject(error)
    }
    answer.then(
      (results) => {
        connection.inFlight--
        // A producer that does not read its answers stops being read from (see afterAnswer).
        if (!connection.socket.destroyed && !connection.socket.write(encodeResults(requestId, results))) connection.socket.pause()
        this.afterAnswer(connection)
      },
      (error: unknown) => {
        connection.inFlight--
        // The put path throws only for misuse (a message of the wrong shape), before it appends
        // anything: the frame's sender broke the protocol.
        this.refuse(connection, `a PUT frame the put path refused: ${(error as Error)?.message ?? String(error)}`)
        this.afterAnswer(connection)
      },
    )
  }

  private afterAnswer(connection: Connection): void {
    if (connection.done) {
      if (connection.inFlight === 0 && !connection.socket.destroyed) connection.socket.end()
    } else if (connection.inFlight < MAX_PUTS_IN_FLIGHT && connection.socket.isPaused() && !connection.socket.writableNeedDrain) {
      connection.socket.resume()
    }
    this.checkDrained()
  }

  /** Closes a connection that broke the protocol; nothing more of it reaches the put path. */
  private refuse(connection: Connection, reason: string): void {
    if (connection.socket.destroyed) return
    this.badFrames++
    connection.done = true
    this.options.log('warn', `shared writes: closed a producer connection: ${reason}`)
    connection.socket.destroy()
  }

  private checkDrained(): void {
    if (this.drained === null) return
    for (const connection of this.connections) if (connection.inFlight > 0) return
    this.drained()
  }

  /**
   * Stops listening and removes the socket; puts already received are answered (within a grace
   * period), then every connection closes: producers resolve what they still wait for with
   * SERVICE_NOT_AVAILABLE and reconnect when a writer listens again. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown()
    return this.closing
  }

  private async shutdown(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()))
    removeSocket(this.options.socketPath)
    for (const connection of this.connections) {
      connection.done = true
      connection.socket.pause()
    }
    const drained = new Promise<void>((resolve) => {
      this.drained = resolve
    })
    this.checkDrained()
    let timer: NodeJS.Timeout | undefined
    await Promise.race([drained, new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_GRACE_MS)))])
    clearTimeout(timer)
    for (const connection of this.connections) connection.socket.destroy()
    this.connections.clear()
    await closed
  }
}

/** Removes a socket file left by a writer that died (only ever called with the store lock held). */
function removeStaleSocket(socketPath: string): boolean {
  let stat: fs.Stats
  try {
    stat = fs.lstatSync(socketPath)
  } catch {
    return false
  }
  if (!stat.isSocket()) {
    throw new MQStoreError('IO_ERROR', `shareWrites: ${socketPath} exists and is not a socket; remove it or move the store`)
  }
  fs.rmSync(socketPath, { force: true })
  return true
}

function removeSocket(socketPath: string): void {
  try {
    fs.rmSync(socketPath, { force: true })
  } catch {
    // Gone already, or the folder with it: nothing to clean.
  }
}
