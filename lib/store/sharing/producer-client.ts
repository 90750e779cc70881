// A producer in another process than the writer (MessageStore.connect): puts travel as PUT frames
// over the store's UNIX domain socket and resolve with the writer's own results. Nothing is
// answered PUT_OK unless the writer said so: a connection that closes before the writer answered
// resolves those puts with SERVICE_NOT_AVAILABLE (the writer may or may not have stored them), and
// puts made while no writer is connected resolve SERVICE_NOT_AVAILABLE at once. The producer
// reconnects by itself, with backoff, while it is open.
import * as net from 'node:net'

import { MQStoreError } from '../../errors.js'
import { PutMessageResult } from '../commitlog/commit-log.js'
import type { HostAddress } from '../commitlog/record.js'
import { checkMessageShape } from '../message-validation.js'
import { StorePaths } from '../store-paths.js'
import { createStoreLog, type StoreLog } from '../store-logger.js'
import type { ConnectOptions, Logger, Message } from '../types.js'
import {
  FrameError,
  FrameReader,
  FrameType,
  HEADER_BYTES,
  LENGTH_BYTES,
  decodeHello,
  decodeResults,
  encodePut,
  encodedMessageBytes,
  type WireResult,
} from './frame.js'
import { socketAddress } from './socket-path.js'

/** First and longest wait between reconnection attempts (doubling, with jitter). */
const RECONNECT_FIRST_MS = 25
const RECONNECT_MAX_MS = 1_000
/** A writer's RESULTS frames are bounded by the PUT frames they answer; this only stops nonsense. */
const MAX_INCOMING_FRAME_BYTES = 256 * 1024 * 1024
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000

/** A PUT frame awaiting its RESULTS. */
interface Pending {
  readonly count: number
  readonly resolve: (results: PutMessageResult[]) => void
}

/** One connection to the writer; replaced by a new one after it closes. */
interface Link {
  readonly socket: net.Socket
  readonly reader: FrameReader
  /** From the writer's HELLO; null until it arrived (puts then wait for no one: see putMessages). */
  maxFrameBytes: number | null
  storeHost: HostAddress | null
  readonly pending: Map<number, Pending>
}

export class Producer implements AsyncDisposable {
  readonly storePath: string
  private readonly socketPath: string
  /** The address last dialled (see socketAddress: it may be relative to the working directory). */
  private address: string
  private readonly log: StoreLog
  private link: Link | null = null
  private nextRequestId = 1
  private closed = false
  private reconnectTimer: NodeJS.Timeout | null = null
  private reconnectDelayMs = RECONNECT_FIRST_MS
  /** Called when a HELLO arrives (connect() and ready() wait on it). */
  private readonly onReady = new Set<() => void>()
  /** Set once a connection was lost, so that its restoration is logged. */
  private lostSince: number | null = null

  private constructor(storePath: string, logger: Logger | undefined) {
    this.storePath = storePath
    this.socketPath = new StorePaths(storePath).shareSocket
    this.address = socketAddress(this.socketPath, 'connect')
    this.log = createStoreLog(logger)
  }

  /**
   * Connects to the writer of the store at `storePath` (absolute). Resolves once the writer
   * answered; rejects with an MQStoreError IO_ERROR when none did within `timeoutMs`.
   */
  static async connect(storePath: string, options: ConnectOptions = {}): Promise<Producer> {
    if (options === null || typeof options !== 'object') throw new TypeError('connect options must be an object')
    const timeoutMs = options.timeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0) throw new RangeError('timeoutMs must be a non-negative number')
    const producer = new Producer(storePath, options.logger)
    producer.dial()
    if (!(await producer.ready(timeoutMs))) {
      await producer.close()
      throw new MQStoreError(
        'IO_ERROR',
        `no writer answered at ${producer.socketPath} within ${timeoutMs} ms: open the store with { shareWrites: true } in one process`,
      )
    }
    return producer
  }

  /** True while connected to a writer that said hello. */
  get connected(): boolean {
    return this.link?.maxFrameBytes != null && !this.link.socket.destroyed
  }

  get isClosed(): boolean {
    return this.closed
  }

  /** Resolves true once connected (at once if connected now), false after `timeoutMs` or close. */
  ready(timeoutMs = DEFAULT_CONNECT_TIMEOUT_MS): Promise<boolean> {
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0) throw new RangeError('timeoutMs must be a non-negative number')
    if (this.connected) return Promise.resolve(true)
    if (this.closed) return Promise.resolve(false)
    return new Promise((resolve) => {
      const done = (ok: boolean): void => {
        clearTimeout(timer)
        this.onReady.delete(onHello)
        resolve(ok)
      }
      const onHello = (): void => done(this.connected)
      const timer = setTimeout(() => done(false), timeoutMs)
      this.onReady.add(onHello)
    })
  }

  /** Forwards one message to the writer; resolves with the writer's result. */
  async putMessage(message: Message): Promise<PutMessageResult> {
    const [result] = await this.putMessages([message])
    return result
  }

  /**
   * Forwards a batch to the writer in one frame (several when it is larger than the writer takes
   * in one: maxMessageSize × 16); each message gets the writer's own result, as putMessages gives
   * in-process. Messages of the wrong shape throw a TypeError here, before anything is sent.
   */
  async putMessages(messages: readonly Message[]): Promise<PutMessageResult[]> {
    if (this.closed) throw new MQStoreError('STORE_CLOSED', 'the producer is closed')
    if (!Array.isArray(messages)) throw new TypeError('messages must be an array')
    const sizes = new Array<number>(messages.length)
    for (let i = 0; i < messages.length; i++) {
      checkMessageShape(messages[i])
      sizes[i] = encodedMessageBytes(messages[i])
    }
    const link = this.link
    if (link === null || link.maxFrameBytes === null || link.socket.destroyed) {
      return messages.map(() => PutMessageResult.failed('SERVICE_NOT_AVAILABLE', 'not connected to the writer; reconnecting'))
    }
    const results = new Array<PutMessageResult>(messages.length)
    const sent: Promise<void>[] = []
    // Greedy packing: as many messages per frame as fit under the writer's limit.
    const room = link.maxFrameBytes - HEADER_BYTES - 4
    let from = 0
    while (from < messages.length) {
      if (sizes[from] > room) {
        results[from] = PutMessageResult.failed(
          'MESSAGE_ILLEGAL',
          `the message takes ${sizes[from]} bytes, more than the writer takes in a frame (${room}); its maxMessageSize is lower`,
        )
        from++
        continue
      }
      let to = from
      let bytes = 0
      while (to < messages.length && sizes[to] <= room && bytes + sizes[to] <= room) bytes += sizes[to++]
      const first = from
      sent.push(
        this.send(link, messages, from, to, bytes).then((answers) => {
          for (let i = 0; i < answers.length; i++) results[first + i] = answers[i]
        }),
      )
      from = to
    }
    await Promise.all(sent)
    return results
  }

  private send(link: Link, messages: readonly Message[], from: number, to: number, bytes: number): Promise<PutMessageResult[]> {
    const requestId = this.nextRequestId
    this.nextRequestId = this.nextRequestId >= 0xffffffff ? 1 : this.nextRequestId + 1
    const frame = encodePut(requestId, messages, from, to, bytes)
    return new Promise((resolve) => {
      link.pending.set(requestId, { count: to - from, resolve })
      // Ref'd while answers are awaited: a program waiting on a put does not exit under it.
      link.socket.ref()
      link.socket.write(frame)
    })
  }

  /** Closes the connection once the writer answered every put made so far. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer)
    this.reconnectTimer = null
    for (const wake of [...this.onReady]) wake()
    const link = this.link
    if (link === null || link.socket.destroyed) return
    const closed = new Promise<void>((resolve) => link.socket.once('close', () => resolve()))
    // Half-close: the writer answers what it received, then ends its side.
    if (link.pending.size === 0) link.socket.destroy()
    else link.socket.end()
    await closed
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  // ---- the connection ------------------------------------------------------------------------

  private dial(): void {
    this.reconnectTimer = null
    if (this.closed) return
    try {
      // Again at each dial: a relative address follows the working directory.
      this.address = socketAddress(this.socketPath, 'connect')
    } catch {
      // The working directory moved away: the address that worked before is as good as any.
    }
    const socket = net.createConnection({ path: this.address })
    const link: Link = {
      socket,
      reader: new FrameReader(MAX_INCOMING_FRAME_BYTES),
      maxFrameBytes: null,
      storeHost: null,
      pending: new Map(),
    }
    this.link = link
    socket.setNoDelay?.(true)
    socket.unref()
    socket.on('data', (chunk: Buffer) => this.received(link, chunk))
    socket.on('error', () => {
      // No writer listens (ENOENT, ECONNREFUSED) or it went away: 'close' follows.
    })
    socket.on('close', () => this.lost(link))
  }

  private received(link: Link, chunk: Buffer): void {
    try {
      for (const frame of link.reader.push(chunk)) {
        if (frame.type === FrameType.HELLO && link.maxFrameBytes === null) {
          const hello = decodeHello(frame.payload)
          if (hello.maxFrameBytes < LENGTH_BYTES + HEADER_BYTES + 4) throw new FrameError(`a frame limit of ${hello.maxFrameBytes} bytes`)
          link.storeHost = hello.storeHost
          link.maxFrameBytes = hello.maxFrameBytes
          this.reconnectDelayMs = RECONNECT_FIRST_MS
          if (this.lostSince !== null) this.log('info', `reconnected to the writer after ${Date.now() - this.lostSince} ms`)
          this.lostSince = null
          for (const wake of [...this.onReady]) wake()
        } else if (frame.type === FrameType.RESULTS && link.maxFrameBytes !== null) {
          this.answered(link, frame.requestId, decodeResults(frame.payload))
        } else {
          throw new FrameError(`an unexpected frame of type ${frame.type}`)
        }
      }
    } catch (error) {
      this.log('error', `closed the connection to the writer: ${(error as Error).message}`)
      link.socket.destroy()
    }
  }

  private answered(link: Link, requestId: number, answers: WireResult[]): void {
    const pending = link.pending.get(requestId)
    if (pending === undefined) throw new FrameError(`results for request ${requestId}, which is not waiting`)
    if (answers.length !== pending.count) throw new FrameError(`${answers.length} results for a request of ${pending.count} messages`)
    link.pending.delete(requestId)
    if (link.pending.size === 0) link.socket.unref()
    const storeHost = link.storeHost
    pending.resolve(
      answers.map(
        (a) =>
          new PutMessageResult(
            a.status,
            a.wroteOffset,
            a.wroteBytes,
            a.queueOffset,
            a.storeTimestamp,
            a.wroteBytes > 0 ? storeHost : null,
            a.reason,
          ),
      ),
    )
  }

  /** The connection closed: whatever it still waited for resolves unavailable; dial again later. */
  private lost(link: Link): void {
    if (this.link === link) this.link = null
    const wasConnected = link.maxFrameBytes !== null
    for (const pending of link.pending.values()) {
      const reason = 'the connection to the writer closed before it answered; the message may or may not have been stored'
      pending.resolve(Array.from({ length: pending.count }, () => PutMessageResult.failed('SERVICE_NOT_AVAILABLE', reason)))
    }
    link.pending.clear()
    if (this.closed) return
    if (wasConnected) {
      this.lostSince = Date.now()
      this.log('warn', 'lost the connection to the writer; reconnecting')
    }
    const delay = this.reconnectDelayMs * (0.5 + Math.random() / 2)
    this.reconnectDelayMs = Math.min(RECONNECT_MAX_MS, this.reconnectDelayMs * 2)
    this.reconnectTimer = setTimeout(() => this.dial(), delay)
    this.reconnectTimer.unref()
  }
}
