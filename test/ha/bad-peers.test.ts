// Peers that break the protocol: each gets its connection closed with a logged reason, and the
// store neither crashes nor changes a byte it had.
import * as fs from 'node:fs'
import * as net from 'node:net'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { closeAll, commitLogBytes, FILE, messages, openStore, waitFor } from './ha-helpers.js'

const sockets: net.Socket[] = []
const servers: net.Server[] = []
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy()
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve))
  await closeAll()
})

function long(value: bigint): Buffer {
  const b = Buffer.alloc(8)
  b.writeBigInt64BE(value)
  return b
}

function header(offset: bigint, size: number): Buffer {
  const b = Buffer.alloc(12)
  b.writeBigInt64BE(offset, 0)
  b.writeInt32BE(size, 8)
  return b
}

async function connectTo(port: number): Promise<{ socket: net.Socket; closed: Promise<void> }> {
  const socket = net.connect({ host: '127.0.0.1', port })
  sockets.push(socket)
  socket.on('error', () => {})
  socket.on('data', () => {})
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  await new Promise((resolve) => socket.once('connect', resolve))
  return { socket, closed }
}

describe('bad slaves against a master', () => {
  async function master(over = {}): Promise<{ store: MessageStore; dir: string; port: number; logs: string[] }> {
    const dir = tempDir('mqstore-ha-bad-')
    const logs: string[] = []
    const store = await openStore(dir, { haListenPort: 0, haHousekeepingInterval: 300, logger: (_l, m) => logs.push(m), ...over })
    await store.putMessages(messages(200))
    return { store, dir, port: store.stats().ha.port as number, logs }
  }

  const cases: [string, (end: number) => Buffer | null, RegExp][] = [
    ['garbage', () => Buffer.from('garbage!garbage!'), /out of range/],
    ['a short report, then nothing', () => Buffer.from([0, 0, 1]), /nothing read for/],
    ['a negative offset', () => long(-5n), /out of range/],
    ['an offset beyond 2^53', () => long(2n ** 60n), /out of range/],
    ['an offset beyond the master end', (end) => long(BigInt(end + 1)), /beyond the master's end/],
    ['nothing at all', () => null, /nothing read for/],
  ]
  for (const [name, bytes, reason] of cases) {
    it(`closes a slave that sends ${name}`, async () => {
      const { store, dir, port, logs } = await master()
      const end = store.getMaxPhyOffset()
      const before = commitLogBytes(dir, 0, end)
      const { socket, closed } = await connectTo(port)
      const data = bytes(end)
      if (data !== null) socket.write(data)
      await closed
      await waitFor(() => store.stats().ha.closedConnections.length === 1, 'the closed connection in stats')
      expect(store.stats().ha.closedConnections[0].reason).toMatch(reason)
      expect(logs.some((line) => reason.test(line))).toBe(true)
      expect(store.getMaxPhyOffset()).toBe(end)
      expect(commitLogBytes(dir, 0, end).equals(before)).toBe(true)
      const [ok] = await store.putMessages(messages(1, 'after'))
      expect(ok.status).toBe('PUT_OK')
    })
  }

  it('closes a slave whose later report runs past the master end', async () => {
    const { store, port } = await master()
    const end = store.getMaxPhyOffset()
    const { socket, closed } = await connectTo(port)
    socket.write(long(BigInt(end)))
    await waitFor(() => store.stats().ha.connections[0]?.ackOffset === end, 'the first report')
    socket.write(long(BigInt(end + 4096)))
    await closed
    await waitFor(() => store.stats().ha.closedConnections.length === 1, 'the reason')
    expect(store.stats().ha.closedConnections[0].reason).toMatch(/reports offset .* beyond the master's end/)
  })

  it('closes a slave asking for bytes retention deleted', async () => {
    const dir = tempDir('mqstore-ha-bad-')
    const first = await openStore(dir)
    await first.putMessages(messages(2000))
    await first.close()
    // What retention does to the oldest file, done while the store is closed.
    fs.rmSync(join(dir, 'commitlog', '0'.repeat(20)))
    const store = await openStore(dir, { haListenPort: 0 })
    expect(store.getMinPhyOffset()).toBe(FILE)
    const { socket, closed } = await connectTo(store.stats().ha.port as number)
    socket.write(long(100n))
    await closed
    await waitFor(() => store.stats().ha.closedConnections.length === 1, 'the reason')
    expect(store.stats().ha.closedConnections[0].reason).toMatch(
      /offset 100, which the master no longer has \(its commit log starts at 65536\)/,
    )
  })

  it('closes connections from addresses not in haAllowedAddresses', async () => {
    const { store, port } = await master({ haAllowedAddresses: ['10.1.2.3'] })
    const { closed } = await connectTo(port)
    await closed
    await waitFor(() => store.stats().ha.closedConnections.length === 1, 'the reason')
    expect(store.stats().ha.closedConnections[0].reason).toMatch(/not in haAllowedAddresses/)
  })
})

describe('bad masters against a slave', () => {
  const cases: [string, (end: number) => Buffer, RegExp][] = [
    ['garbage', () => Buffer.from('this is not a frame at all'), /out of range|differs|body size/],
    ['a negative offset', () => header(-1n, 0), /out of range/],
    ['a body larger than a frame may be', (end) => header(BigInt(end), 5 * 1024 * 1024), /body size/],
    ['a negative body size', (end) => header(BigInt(end), -1), /body size/],
    ['a frame that does not start at the slave end', (end) => Buffer.concat([header(BigInt(end + 8), 4), Buffer.alloc(4)]), /differs/],
    ['a short frame, then nothing', (end) => header(BigInt(end), 100).subarray(0, 12 + 0), /nothing read from master/],
  ]
  for (const [name, bytes, reason] of cases) {
    it(`drops a master that sends ${name}`, async () => {
      // The slave's own log first: replicated from a real mqstore master, which then goes away.
      const masterDir = tempDir('mqstore-ha-bad-master-')
      const good = await openStore(masterDir, { haListenPort: 0 })
      await good.putMessages(messages(100))
      const end = good.getMaxPhyOffset()
      const slaveDir = tempDir('mqstore-ha-bad-slave-')
      const logs: string[] = []
      const server = net.createServer((socket) => {
        sockets.push(socket)
        socket.on('error', () => {})
        socket.once('data', () => socket.write(bytes(end)))
      })
      servers.push(server)
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      const badPort = (server.address() as net.AddressInfo).port
      // Seed: copy the good master's log into the slave by replication, then point it at the bad one.
      const seeding = await openStore(slaveDir, { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${good.stats().ha.port}` })
      await waitFor(() => seeding.getMaxPhyOffset() === end, 'the seed')
      await seeding.close()
      await good.close()
      const before = commitLogBytes(slaveDir, 0, end)
      const slave = await openStore(slaveDir, {
        brokerRole: 'SLAVE',
        haMasterAddress: `127.0.0.1:${badPort}`,
        haHousekeepingInterval: 300,
        logger: (_l, m) => logs.push(m),
      })
      await waitFor(() => slave.stats().ha.slave?.reconnects !== 0, 'the drop')
      expect(slave.stats().ha.slave?.notConnectedReason ?? logs.join('\n')).toMatch(reason)
      expect(logs.some((line) => reason.test(line))).toBe(true)
      expect(slave.getMaxPhyOffset()).toBe(end)
      expect(commitLogBytes(slaveDir, 0, end).equals(before)).toBe(true)
    })
  }

  it('backs off ever longer from a master that accepts and closes at once', async () => {
    let accepted = 0
    const server = net.createServer((socket) => {
      accepted++
      sockets.push(socket)
      socket.on('error', () => {})
      socket.destroy()
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const port = (server.address() as net.AddressInfo).port
    const slave = await openStore(tempDir('mqstore-ha-closing-master-'), { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${port}` })
    await waitFor(() => accepted > 0, 'a first connection')
    await new Promise((resolve) => setTimeout(resolve, 2_500))
    // 100, 200, 400, 800 ms and on: a handful of tries, not one every 100 ms.
    expect(accepted).toBeLessThanOrEqual(7)
    expect(slave.stats().ha.slave?.connected).toBe(false)
  })
})
