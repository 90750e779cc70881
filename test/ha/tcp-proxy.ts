// A loopback TCP proxy between a slave and its master, for the network-fault tests. Each
// connection the slave opens gets its own link to the master. The proxy knows the protocol's frame
// layout (8-byte offset, 4-byte size, body) only to cut a link in the middle of a frame.
//
//   stall(direction)   stops reading one direction (or both) on every link, old and new: bytes
//                      wait in the kernel, the sockets stay open
//   heal()             forwards everything again, at full speed
//   throttle(n)        the slave receives at most n bytes every 10 ms (a slow reader): the proxy
//                      stops reading the master's socket once it holds 64 KiB
//   silentCloses       when one side of a link closes, leave the other open and silent (a peer
//                      that vanished without a FIN, as after a cable pull); otherwise the other
//                      side gets what was in flight, then the close
//   cutInFrame(where)  the next master-to-slave chunk holding a frame's header or body is cut
//                      inside it: what comes before is forwarded, then both sides are destroyed
import * as net from 'node:net'

export type Direction = 'toSlave' | 'toMaster'

const HEADER = 12
const TICK_MS = 10
const HIGH_WATER = 64 * 1024

/** Where a frame is in the master's stream: inside a header or inside a body. */
class FrameTracker {
  private headerLeft = HEADER
  private header = Buffer.alloc(HEADER)
  private bodyLeft = 0

  /** How far into `chunk` to forward to cut inside a `where`, or -1 when it holds no such point. */
  cutPoint(chunk: Buffer, where: 'header' | 'body'): number {
    let headerLeft = this.headerLeft
    let bodyLeft = this.bodyLeft
    const header = Buffer.from(this.header)
    for (let at = 0; at < chunk.length; ) {
      if (bodyLeft > 0) {
        if (where === 'body' && bodyLeft > 1 && at + 1 < chunk.length) return at + 1
        const n = Math.min(bodyLeft, chunk.length - at)
        bodyLeft -= n
        at += n
        continue
      }
      if (where === 'header' && headerLeft === HEADER && chunk.length - at > 5) return at + 5
      header[HEADER - headerLeft] = chunk[at]
      headerLeft--
      at++
      if (headerLeft === 0) {
        bodyLeft = header.readInt32BE(8)
        headerLeft = HEADER
      }
    }
    return -1
  }

  /** Follows the bytes forwarded. */
  pass(chunk: Buffer): void {
    for (let at = 0; at < chunk.length; ) {
      if (this.bodyLeft > 0) {
        const n = Math.min(this.bodyLeft, chunk.length - at)
        this.bodyLeft -= n
        at += n
        continue
      }
      this.header[HEADER - this.headerLeft] = chunk[at]
      this.headerLeft--
      at++
      if (this.headerLeft === 0) {
        this.bodyLeft = this.header.readInt32BE(8)
        this.headerLeft = HEADER
      }
    }
  }
}

class Link {
  readonly frames = new FrameTracker()
  /** Master-to-slave bytes read but not yet given to the slave (throttled). */
  private queue: Buffer[] = []
  private queued = 0
  private ending = false
  closed = false

  constructor(
    readonly slave: net.Socket,
    readonly master: net.Socket,
    private readonly proxy: TcpProxy,
  ) {
    for (const socket of [slave, master]) {
      socket.setNoDelay(true)
      socket.on('error', () => {})
      socket.on('close', () => this.sideClosed())
    }
    slave.on('data', (chunk: Buffer) => {
      this.proxy.forwarded.toMaster += chunk.length
      master.write(chunk)
    })
    master.on('data', (chunk: Buffer) => this.fromMaster(chunk))
    this.apply()
  }

  private fromMaster(chunk: Buffer): void {
    const cut = this.proxy.takeCut()
    if (cut !== null) {
      const at = this.frames.cutPoint(chunk, cut)
      if (at < 0) this.proxy.putBackCut(cut)
      else {
        this.toSlave(chunk.subarray(0, at))
        this.proxy.cuts++
        // Let the partial frame reach the slave before the link goes.
        setTimeout(() => this.destroy(), 20)
        this.master.pause()
        this.closed = true
        return
      }
    }
    this.toSlave(chunk)
  }

  private toSlave(chunk: Buffer): void {
    if (this.proxy.throttleBytes === null && this.queued === 0) {
      this.frames.pass(chunk)
      this.proxy.forwarded.toSlave += chunk.length
      this.slave.write(chunk)
      return
    }
    this.queue.push(chunk)
    this.queued += chunk.length
    if (this.queued > HIGH_WATER) this.master.pause()
  }

  /** One throttle tick: hands the slave up to the allowance. */
  tick(): void {
    let allowance = this.proxy.throttleBytes ?? Number.POSITIVE_INFINITY
    while (allowance > 0 && this.queue.length > 0 && !this.closed) {
      const head = this.queue[0]
      const n = Math.min(allowance, head.length)
      const part = head.subarray(0, n)
      if (n === head.length) this.queue.shift()
      else this.queue[0] = head.subarray(n)
      this.queued -= n
      allowance -= n
      this.frames.pass(part)
      this.proxy.forwarded.toSlave += n
      this.slave.write(part)
    }
    if (this.ending && this.queued === 0 && !this.closed) {
      this.closed = true
      this.slave.end()
      this.master.end()
      return
    }
    this.apply()
  }

  /** Pauses or resumes each side as the stall and the throttle say. */
  apply(): void {
    if (this.closed) return
    const stalled = this.proxy.stalled
    if (stalled.has('toMaster')) this.slave.pause()
    else this.slave.resume()
    if (stalled.has('toSlave') || this.queued > HIGH_WATER) this.master.pause()
    else this.master.resume()
  }

  private sideClosed(): void {
    if (this.proxy.silentCloses || this.closed) return
    // As TCP does: what a side sent before it closed still reaches the other, then the close.
    this.ending = true
    this.tick()
  }

  destroy(): void {
    this.closed = true
    this.slave.destroy()
    this.master.destroy()
  }
}

export class TcpProxy {
  private readonly server: net.Server
  readonly links: Link[] = []
  readonly stalled = new Set<Direction>()
  readonly forwarded = { toSlave: 0, toMaster: 0 }
  throttleBytes: number | null = null
  silentCloses = false
  cuts = 0
  private pendingCuts: ('header' | 'body')[] = []
  private readonly ticker: NodeJS.Timeout
  port = -1

  private constructor(private readonly masterPort: number) {
    this.server = net.createServer((slave) => {
      const master = net.connect({ host: '127.0.0.1', port: this.masterPort })
      this.links.push(new Link(slave, master, this))
    })
    this.ticker = setInterval(() => {
      for (const link of this.links) link.tick()
    }, TICK_MS)
  }

  static async start(masterPort: number): Promise<TcpProxy> {
    const proxy = new TcpProxy(masterPort)
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve))
    proxy.port = (proxy.server.address() as net.AddressInfo).port
    return proxy
  }

  get address(): string {
    return `127.0.0.1:${this.port}`
  }

  /** Links whose both sides are still open. */
  get openLinks(): number {
    return this.links.filter((link) => !link.closed && !link.slave.destroyed && !link.master.destroyed).length
  }

  stall(...directions: Direction[]): void {
    for (const direction of directions) this.stalled.add(direction)
    for (const link of this.links) link.apply()
  }

  heal(): void {
    this.stalled.clear()
    this.throttleBytes = null
    this.silentCloses = false
    for (const link of this.links) link.tick()
  }

  throttle(bytesPerTick: number): void {
    this.throttleBytes = bytesPerTick
  }

  /** Arms a cut inside the next frame header or body the master sends. */
  cutInFrame(where: 'header' | 'body'): void {
    this.pendingCuts.push(where)
  }

  takeCut(): 'header' | 'body' | null {
    return this.pendingCuts.shift() ?? null
  }

  putBackCut(where: 'header' | 'body'): void {
    this.pendingCuts.unshift(where)
  }

  async close(): Promise<void> {
    clearInterval(this.ticker)
    for (const link of this.links) link.destroy()
    await new Promise((resolve) => this.server.close(resolve))
  }
}
