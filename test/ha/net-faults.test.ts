// Replication through a loopback TCP proxy that breaks the network: links cut in the middle of a
// frame, stalls longer than the heartbeat and housekeeping intervals, half-open links (one
// direction stops, the sockets stay), and a slave that reads slowly. Each time the slave's commit
// log ends equal to the master's byte for byte from its start (nothing lost, nothing twice), it
// reconnects, and the master never holds more than one frame for a slave (stats().ha queuedBytes).
import { afterEach, describe, expect, it } from 'vitest'
import type { MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { caughtUp, closeAll, commitLogBytes, joinedFromStart, messages, openStore, waitFor } from './ha-helpers.js'
import { TcpProxy } from './tcp-proxy.js'

const FAST = { haSendHeartbeatInterval: 100, haHousekeepingInterval: 600 }
const BATCH = 8 * 1024
/** What one connection may hold on the master: a frame header and one body. */
const ONE_FRAME = 12 + BATCH

const proxies: TcpProxy[] = []
const samplers: NodeJS.Timeout[] = []
afterEach(async () => {
  for (const sampler of samplers.splice(0)) clearInterval(sampler)
  for (const proxy of proxies.splice(0)) await proxy.close()
  await closeAll()
})

interface Pair {
  master: MessageStore
  slave: MessageStore
  proxy: TcpProxy
  masterDir: string
  slaveDir: string
  masterLogs: string[]
  slaveLogs: string[]
  /** The largest queuedBytes seen on any master connection (sampled every 5 ms). */
  maxQueued: () => number
}

async function pair(): Promise<Pair> {
  const masterDir = tempDir('mqstore-ha-net-master-')
  const slaveDir = tempDir('mqstore-ha-net-slave-')
  const masterLogs: string[] = []
  const slaveLogs: string[] = []
  const master = await openStore(masterDir, {
    haListenPort: 0,
    haTransferBatchSize: BATCH,
    ...FAST,
    logger: (_level, message) => masterLogs.push(message),
  })
  const proxy = await TcpProxy.start(master.stats().ha.port as number)
  proxies.push(proxy)
  const slave = await openStore(slaveDir, {
    brokerRole: 'SLAVE',
    haMasterAddress: proxy.address,
    ...FAST,
    logger: (_level, message) => slaveLogs.push(message),
  })
  let maxQueued = 0
  const sampler = setInterval(() => {
    if (master.isClosed) return
    for (const connection of master.stats().ha.connections) maxQueued = Math.max(maxQueued, connection.queuedBytes)
  }, 5)
  samplers.push(sampler)
  await joinedFromStart(master)
  return { master, slave, proxy, masterDir, slaveDir, masterLogs, slaveLogs, maxQueued: () => maxQueued }
}

async function put(store: MessageStore, count: number, prefix: string, bodyBytes = 0): Promise<void> {
  const all = messages(count, prefix).map((m) =>
    bodyBytes === 0 ? m : { ...m, body: Buffer.concat([m.body, Buffer.alloc(bodyBytes, 7)]) },
  )
  for (let i = 0; i < all.length; i += 50) {
    const results = await store.putMessages(all.slice(i, i + 50))
    expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
  }
}

/** The slave catches up and holds the master's bytes from its start, and the same queues. */
async function expectSame({ master, slave, masterDir, slaveDir, maxQueued }: Pair): Promise<void> {
  const end = master.getMaxPhyOffset()
  await waitFor(() => caughtUp(slave, end), 'the slave to catch up', 90_000)
  const from = slave.getMinPhyOffset()
  expect(from).toBe(0)
  expect(commitLogBytes(slaveDir, from, end).equals(commitLogBytes(masterDir, from, end))).toBe(true)
  for (const topic of ['orders', 'payments', 'audit']) {
    for (let queueId = 0; queueId < 4; queueId++) {
      expect(slave.getMaxOffsetInQueue(topic, queueId)).toBe(master.getMaxOffsetInQueue(topic, queueId))
    }
  }
  expect(maxQueued()).toBeLessThanOrEqual(ONE_FRAME)
}

describe('replication through network faults', () => {
  it('resumes without losing or repeating a byte after links cut inside frame headers and bodies', { timeout: 120_000 }, async () => {
    const p = await pair()
    await put(p.master, 300, 'first')
    await waitFor(() => caughtUp(p.slave, p.master), 'the first copy')
    for (let round = 0; round < 6; round++) {
      await waitFor(() => p.slave.stats().ha.slave?.connected === true && p.proxy.openLinks === 1, 'a connected slave')
      const cuts = p.proxy.cuts
      p.proxy.cutInFrame(round % 2 === 0 ? 'body' : 'header')
      await put(p.master, 200, `round${round}`, 300)
      await waitFor(() => p.proxy.cuts > cuts, 'the cut')
    }
    await waitFor(() => (p.slave.stats().ha.slave?.reconnects ?? 0) >= 6, 'the reconnections')
    await expectSame(p)
    expect(p.slaveLogs.some((line) => /master .* closed the connection/.test(line))).toBe(true)
    expect(p.master.stats().ha.closedConnections.length).toBeGreaterThanOrEqual(6)
  })

  it('drops a link stalled past haHousekeepingInterval on both sides, and reconnects once it flows', { timeout: 120_000 }, async () => {
    const p = await pair()
    await put(p.master, 300, 'before')
    await waitFor(() => caughtUp(p.slave, p.master), 'the first copy')
    p.proxy.stall('toSlave', 'toMaster')
    await put(p.master, 600, 'during', 200)
    await waitFor(
      () => p.master.stats().ha.closedConnections.some((c) => /nothing read for \d+ ms/.test(c.reason)),
      'the master to drop the silent slave',
    )
    await waitFor(() => p.slaveLogs.some((line) => /nothing read from master/.test(line)), 'the slave to drop the silent master')
    expect(p.slave.getMaxPhyOffset()).toBeLessThan(p.master.getMaxPhyOffset())
    p.proxy.heal()
    await put(p.master, 100, 'after')
    await expectSame(p)
  })

  it('recovers from a half-open link whose master-to-slave direction died silently', { timeout: 120_000 }, async () => {
    const p = await pair()
    await put(p.master, 300, 'before')
    await waitFor(() => caughtUp(p.slave, p.master), 'the first copy')
    // The slave's reports still reach the master, which keeps the link; no FIN crosses when one side closes.
    p.proxy.silentCloses = true
    p.proxy.stall('toSlave')
    await put(p.master, 600, 'during', 200)
    await waitFor(() => p.slaveLogs.some((line) => /nothing read from master/.test(line)), 'the slave to drop the silent master')
    await waitFor(
      () => p.master.stats().ha.closedConnections.some((c) => /nothing read for \d+ ms/.test(c.reason)),
      'the master to drop the vanished slave',
    )
    p.proxy.heal()
    await put(p.master, 100, 'after')
    await expectSame(p)
  })

  it('recovers from a half-open link whose slave-to-master direction died silently', { timeout: 120_000 }, async () => {
    const p = await pair()
    await put(p.master, 300, 'before')
    await waitFor(() => caughtUp(p.slave, p.master), 'the first copy')
    // The master keeps sending but hears no report; once it drops the link, the slave's side stays open and silent.
    p.proxy.silentCloses = true
    p.proxy.stall('toMaster')
    await put(p.master, 600, 'during', 200)
    await waitFor(
      () => p.master.stats().ha.closedConnections.some((c) => /nothing read for \d+ ms/.test(c.reason)),
      'the master to drop the silent slave',
    )
    await waitFor(() => p.slaveLogs.some((line) => /nothing read from master/.test(line)), 'the slave to drop the silent master')
    p.proxy.heal()
    await put(p.master, 100, 'after')
    await expectSame(p)
  })

  it('feeds a slow reader without queueing more than a frame on the master', { timeout: 180_000 }, async () => {
    const p = await pair()
    await put(p.master, 100, 'before')
    await waitFor(() => caughtUp(p.slave, p.master), 'the first copy')
    // 16 KiB per 10 ms: about 1.6 MB/s, far below what the master can send.
    p.proxy.throttle(16 * 1024)
    const start = p.master.getMaxPhyOffset()
    await put(p.master, 3000, 'slow', 2000)
    expect(p.master.getMaxPhyOffset() - start).toBeGreaterThan(6_000_000)
    await waitFor(() => p.maxQueued() > 0, 'the master to be held back by the slow reader', 60_000)
    await expectSame(p)
  })
})
