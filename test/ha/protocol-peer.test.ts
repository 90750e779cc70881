// A peer written from the protocol's bytes alone (RocketMQ 4.9: the slave reports its max offset
// as a big-endian long; the master sends big-endian offset, int size, raw bytes), acting as a
// RocketMQ slave against an mqstore master and as a RocketMQ master feeding an mqstore slave.
import * as net from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { tempDir } from '../helpers/tmp.js'
import { caughtUp, closeAll, commitLogBytes, FILE, messages, openStore, waitFor } from './ha-helpers.js'

const sockets: net.Socket[] = []
const servers: net.Server[] = []
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy()
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve))
  await closeAll()
})

function report(offset: number | bigint): Buffer {
  const b = Buffer.alloc(8)
  b.writeBigInt64BE(BigInt(offset))
  return b
}

function frame(offset: number | bigint, body: Buffer, size = body.length): Buffer {
  const header = Buffer.alloc(12)
  header.writeBigInt64BE(BigInt(offset), 0)
  header.writeInt32BE(size, 8)
  return Buffer.concat([header, body])
}

/** A RocketMQ-style slave: collects the master's frames as they arrive. */
class RawSlave {
  readonly socket: net.Socket
  readonly frames: { offset: number; size: number; body: Buffer }[] = []
  private pending = Buffer.alloc(0)
  closed = false

  constructor(port: number) {
    this.socket = net.connect({ host: '127.0.0.1', port })
    sockets.push(this.socket)
    this.socket.on('data', (chunk: Buffer) => {
      this.pending = Buffer.concat([this.pending, chunk])
      while (this.pending.length >= 12) {
        const size = this.pending.readInt32BE(8)
        if (this.pending.length < 12 + size) break
        this.frames.push({ offset: Number(this.pending.readBigInt64BE(0)), size, body: this.pending.subarray(12, 12 + size) })
        this.pending = this.pending.subarray(12 + size)
      }
    })
    this.socket.on('close', () => {
      this.closed = true
    })
    this.socket.on('error', () => {})
  }

  async connected(): Promise<void> {
    if (this.socket.readyState !== 'open') await new Promise((resolve) => this.socket.once('connect', resolve))
  }

  received(): number {
    return this.frames.reduce((sum, f) => sum + f.size, 0)
  }
}

describe('a RocketMQ slave written from the bytes, against an mqstore master', () => {
  it('gets the master last file from its start for offset 0, in frames of at most haTransferBatchSize, then heartbeats', async () => {
    const dir = tempDir('mqstore-ha-raw-')
    const master = await openStore(dir, { haListenPort: 0, haTransferBatchSize: 3000, haSendHeartbeatInterval: 200 })
    await master.putMessages(messages(2000))
    const end = master.getMaxPhyOffset()
    const lastFile = end - (end % FILE)
    expect(lastFile).toBeGreaterThan(0)
    const slave = new RawSlave(master.stats().ha.port as number)
    await slave.connected()
    slave.socket.write(report(0))
    await waitFor(() => slave.received() === end - lastFile && slave.frames.at(-1)?.size === 0, 'every byte and a heartbeat')
    expect(slave.frames[0].offset).toBe(lastFile)
    let at = lastFile
    for (const f of slave.frames) {
      expect(f.offset).toBe(at)
      expect(f.size).toBeLessThanOrEqual(3000)
      at += f.size
    }
    const bytes = Buffer.concat(slave.frames.map((f) => f.body))
    expect(bytes.equals(commitLogBytes(dir, lastFile, end))).toBe(true)
    expect(slave.frames.at(-1)?.offset).toBe(end)
    slave.socket.write(report(end))
    await waitFor(() => master.stats().ha.connections[0]?.ackOffset === end, 'the ack')
    expect(master.stats().ha.connections[0]).toMatchObject({ ackOffset: end, lagBytes: 0, transferOffset: end })
  })

  it('serves a slave from the offset it reports, and a put wakes the transfer', async () => {
    const dir = tempDir('mqstore-ha-raw-')
    const master = await openStore(dir, { haListenPort: 0 })
    await master.putMessages(messages(300))
    const from = master.getMaxPhyOffset()
    const slave = new RawSlave(master.stats().ha.port as number)
    await slave.connected()
    slave.socket.write(report(from))
    await waitFor(() => master.stats().ha.connections[0]?.ackOffset === from, 'the connection')
    await master.putMessages(messages(50, 'next'))
    const end = master.getMaxPhyOffset()
    await waitFor(() => slave.received() === end - from, 'the new bytes')
    expect(slave.frames[0].offset).toBe(from)
    expect(Buffer.concat(slave.frames.map((f) => f.body)).equals(commitLogBytes(dir, from, end))).toBe(true)
  })
})

describe('a RocketMQ master written from the bytes, feeding an mqstore slave', () => {
  it('feeds frames cut mid-record; the slave appends, dispatches and serves them, and closes on an offset mismatch', async () => {
    const sourceDir = tempDir('mqstore-ha-source-')
    const source = await openStore(sourceDir)
    const sent = messages(1500, 'fed')
    await source.putMessages(sent)
    const end = source.getMaxPhyOffset()
    await source.close()
    const log = commitLogBytes(sourceDir, 0, end)
    const reports: number[] = []
    let connections = 0
    const server = net.createServer((socket) => {
      sockets.push(socket)
      connections++
      let pending = Buffer.alloc(0)
      let fed = false
      socket.on('data', (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk])
        while (pending.length >= 8) {
          reports.push(Number(pending.readBigInt64BE(0)))
          pending = pending.subarray(8)
        }
        if (fed || connections > 1) return
        fed = true
        // Odd-sized frames that never span a file, so most cut a record.
        for (let at = 0; at < end; ) {
          const size = Math.min(777, end - at, FILE - (at % FILE))
          socket.write(frame(at, log.subarray(at, at + size)))
          at += size
        }
      })
      socket.on('error', () => {})
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const port = (server.address() as net.AddressInfo).port
    const slaveDir = tempDir('mqstore-ha-slave-')
    const slave = await openStore(slaveDir, { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${port}` })
    await waitFor(() => caughtUp(slave, end), 'the slave to take every byte')
    expect(reports[0]).toBe(0)
    await waitFor(() => reports.includes(end), 'a report of the end')
    expect(commitLogBytes(slaveDir, 0, end).equals(log)).toBe(true)
    expect(slave.getLatestByKey('orders', 'fed-key-1497')?.body.toString()).toBe(sent[1497].body.toString())
    expect(slave.getMaxOffsetInQueue('audit', 1)).toBe(sent.filter((m) => m.topic === 'audit' && m.queueId === 1).length)
    // A frame that does not start at the slave's end: it closes the connection and reconnects.
    const [first] = sockets.filter((s) => s.remotePort !== port)
    first.write(frame(end + 100, Buffer.alloc(10)))
    await waitFor(() => connections === 2 && reports.at(-1) === end, 'a reconnect')
    expect(slave.stats().ha.slave?.reconnects).toBe(1)
    expect(slave.getMaxPhyOffset()).toBe(end)
  })
})
