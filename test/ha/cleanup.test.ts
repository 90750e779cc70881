// Replication while the master cleans up: retention deletes old commit-log files under a slave that
// keeps up, compaction cleans a compacted topic, and a slave that lags behind retention is told so
// (the connection closes, with why in the log and stats().ha on both sides) instead of being sent
// heartbeats forever as RocketMQ's master would.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { MessageExt, MessageStore, OpenOptions } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { isTempSegmentName } from '../../lib/store/mapped/segment-name.js'
import { caughtUp, closeAll, commitLogBytes, FILE, joinedFromStart, messages, openStore, readQueue, waitFor } from './ha-helpers.js'
import { TcpProxy } from './tcp-proxy.js'

const HOUR = 3_600_000
const RETENTION: OpenOptions = { deleteCommitLogFilesInterval: 0, deleteConsumeQueueFilesInterval: 0 }
// The master drops a silent slave in 3 s: long enough that a busy event loop does not look like silence.
const FAST = { haSendHeartbeatInterval: 100, haHousekeepingInterval: 3_000 }

const proxies: TcpProxy[] = []
afterEach(async () => {
  for (const proxy of proxies.splice(0)) await proxy.close()
  await closeAll()
})

async function put(store: MessageStore, count: number, prefix: string, bodyBytes = 0): Promise<void> {
  const all = messages(count, prefix).map((m) =>
    bodyBytes === 0 ? m : { ...m, body: Buffer.concat([m.body, Buffer.alloc(bodyBytes, 5)]) },
  )
  for (let i = 0; i < all.length; i += 50) {
    const results = await store.putMessages(all.slice(i, i + 50))
    expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
  }
}

/** Makes the commit-log files of `dir` that start below `below` 100 hours old. */
function ageFilesBelow(dir: string, below: number): number {
  let aged = 0
  for (const name of fs.readdirSync(join(dir, 'commitlog'))) {
    if (isTempSegmentName(name) || Number(name) >= below) continue
    const at = (Date.now() - 100 * HOUR) / 1000
    fs.utimesSync(join(dir, 'commitlog', name), at, at)
    aged++
  }
  return aged
}

/** Runs manual retention passes until the commit log starts at `min` or later. */
async function retain(store: MessageStore, min: number): Promise<void> {
  store.executeDeleteFilesManually()
  const deadline = Date.now() + 60_000
  while (store.getMinPhyOffset() < min) {
    if (Date.now() > deadline) throw new Error(`retention did not reach ${min} (the commit log starts at ${store.getMinPhyOffset()})`)
    await store.runCleanupPass()
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

const shape = (m: MessageExt) => `${m.queueOffset}:${m.commitLogOffset}:${m.keys}:${m.body.toString()}`

describe('replication while the master cleans up', () => {
  it('keeps a slave up while retention deletes old files on the master, and on the slave too', { timeout: 120_000 }, async () => {
    const masterDir = tempDir('mqstore-ha-clean-master-')
    const slaveDir = tempDir('mqstore-ha-clean-slave-')
    const master = await openStore(masterDir, { haListenPort: 0, ...RETENTION })
    const slave = await openStore(slaveDir, {
      brokerRole: 'SLAVE',
      haMasterAddress: `127.0.0.1:${master.stats().ha.port}`,
      ...RETENTION,
    })
    await joinedFromStart(master)
    await put(master, 3000, 'old')
    const oldEnd = master.getMaxPhyOffset()
    await waitFor(() => caughtUp(slave, oldEnd), 'the slave to catch up')
    await waitFor(() => master.stats().commitLogFlushedOffset === oldEnd, 'the master to flush')
    const history = commitLogBytes(masterDir, 0, oldEnd)
    const cut = oldEnd - (oldEnd % FILE) - FILE
    expect(cut).toBeGreaterThanOrEqual(2 * FILE)
    expect(ageFilesBelow(masterDir, cut)).toBe(cut / FILE)
    // Retention runs while puts go on and the slave replicates them.
    const putting = put(master, 2000, 'new')
    await retain(master, cut)
    await putting
    const end = master.getMaxPhyOffset()
    await waitFor(() => caughtUp(slave, end), 'the slave to catch up again')
    expect(master.getMinPhyOffset()).toBe(cut)
    expect(master.stats().ha.connections).toHaveLength(1)
    expect(master.stats().ha.closedConnections).toEqual([])
    // The slave keeps what the master deleted (its retention is its own) and has the rest byte for byte.
    expect(slave.getMinPhyOffset()).toBe(0)
    expect(commitLogBytes(slaveDir, 0, oldEnd).equals(history)).toBe(true)
    expect(commitLogBytes(slaveDir, cut, end).equals(commitLogBytes(masterDir, cut, end))).toBe(true)
    for (const topic of ['orders', 'payments', 'audit']) {
      for (let queueId = 0; queueId < 4; queueId++) {
        const kept = readQueue(master, topic, queueId)
        expect(kept.length).toBeGreaterThan(0)
        const onSlave = readQueue(slave, topic, queueId).filter((m) => m.queueOffset >= kept[0].queueOffset)
        expect(onSlave.map(shape)).toEqual(kept.map(shape))
      }
    }
    expect(slave.getLatestByKey('payments', 'new-key-1999')?.body.toString()).toBe(
      master.getLatestByKey('payments', 'new-key-1999')?.body.toString(),
    )
    // The slave's own retention, while it goes on replicating.
    await waitFor(() => slave.stats().commitLogFlushedOffset === end, 'the slave to flush')
    ageFilesBelow(slaveDir, cut)
    const more = put(master, 500, 'more')
    await retain(slave, cut)
    await more
    await waitFor(() => caughtUp(slave, master), 'the slave to catch up after its retention')
    const last = master.getMaxPhyOffset()
    expect(commitLogBytes(slaveDir, cut, last).equals(commitLogBytes(masterDir, cut, last))).toBe(true)
    expect(slave.getMessage('g', 'orders', 0, 0, 1).status).toBe('OFFSET_TOO_SMALL')
  })

  it('serves a compacted topic as the master does, with compaction running on the master while it replicates', {
    timeout: 120_000,
  }, async () => {
    const TOPIC = 'profiles'
    const compacted: OpenOptions = {
      topics: { [TOPIC]: { cleanupPolicy: 'compact', segmentBytes: 4096, minCleanableDirtyRatio: 0 } },
      compaction: { enabled: false, fileDeleteDelayMs: 0 },
    }
    const masterDir = tempDir('mqstore-ha-compact-master-')
    const slaveDir = tempDir('mqstore-ha-compact-slave-')
    // SYNC_FLUSH on the master: a pass cleans only flushed records. (The slave keeps ASYNC_FLUSH: a
    // SYNC_FLUSH store flushes only for puts that wait, and a slave has none.)
    const master = await openStore(masterDir, { haListenPort: 0, ...compacted, flushDiskType: 'SYNC_FLUSH' })
    const slave = await openStore(slaveDir, {
      brokerRole: 'SLAVE',
      haMasterAddress: `127.0.0.1:${master.stats().ha.port}`,
      ...compacted,
    })
    await joinedFromStart(master)
    const latest = new Map<string, string>()
    const round = async (r: number) => {
      const batch = Array.from({ length: 40 }, (_, k) => ({
        topic: TOPIC,
        queueId: k % 2,
        body: Buffer.from(`v${r}-${k}-${'p'.repeat(80)}`),
        keys: `user-${k}`,
      }))
      const results = await master.putMessages(batch)
      expect(results.every((x) => x.status === 'PUT_OK')).toBe(true)
      for (const m of batch) latest.set(m.keys, m.body.toString())
    }
    for (let r = 0; r < 30; r++) await round(r)
    // Passes on the master while puts go on.
    let dropped = 0
    for (let r = 30; r < 40; r++) {
      await round(r)
      dropped += (await master.compact(TOPIC)).recordsDropped
    }
    expect(dropped).toBeGreaterThan(0)
    const end = master.getMaxPhyOffset()
    await waitFor(() => caughtUp(slave, end), 'the slave to catch up')
    expect(commitLogBytes(slaveDir, 0, end).equals(commitLogBytes(masterDir, 0, end))).toBe(true)
    // The slave compacts on its own (as any store does); then both serve the same messages.
    await waitFor(() => slave.stats().commitLogFlushedOffset === end, 'the slave to flush')
    expect((await slave.compact(TOPIC)).failed).toEqual([])
    await master.compact(TOPIC)
    for (const queueId of [0, 1]) {
      const onMaster = readQueue(master, TOPIC, queueId)
      const onSlave = readQueue(slave, TOPIC, queueId)
      expect(onSlave.map(shape)).toEqual(onMaster.map(shape))
      expect(onMaster.length).toBeLessThan(40 * 20)
    }
    for (const [key, body] of latest) {
      expect(slave.getLatestByKey(TOPIC, key)?.body.toString()).toBe(body)
      expect(master.getLatestByKey(TOPIC, key)?.body.toString()).toBe(body)
    }
  })

  it('closes a lagging slave whose next bytes retention deleted, with why on both sides', { timeout: 180_000 }, async () => {
    const BIG = 1024 * 1024
    const sizes = { mappedFileSizeCommitLog: BIG, ...RETENTION }
    const masterDir = tempDir('mqstore-ha-lag-master-')
    const slaveDir = tempDir('mqstore-ha-lag-slave-')
    const masterLogs: string[] = []
    const slaveLogs: string[] = []
    const master = await openStore(masterDir, { haListenPort: 0, ...sizes, ...FAST, logger: (_l, m) => masterLogs.push(m) })
    const proxy = await TcpProxy.start(master.stats().ha.port as number)
    proxies.push(proxy)
    const slave = await openStore(slaveDir, {
      brokerRole: 'SLAVE',
      haMasterAddress: proxy.address,
      ...sizes,
      ...FAST,
      // Long enough that the stall below does not make the slave give up first.
      haHousekeepingInterval: 120_000,
      logger: (_l, m) => slaveLogs.push(m),
    })
    await joinedFromStart(master)
    await put(master, 100, 'first')
    await waitFor(() => caughtUp(slave, master), 'the slave to catch up')
    // The link stops carrying frames: the master's sender blocks once the kernel's buffers are full.
    proxy.stall('toSlave')
    const connection = () => master.stats().ha.connections[0]
    for (let n = 0; master.getMaxPhyOffset() < 64 * BIG; n++) {
      await put(master, 500, `lag${n}`, 2000)
      // Give the sender turns: puts alone would keep it from the event loop.
      await new Promise((resolve) => setTimeout(resolve, 50))
      if ((connection()?.queuedBytes ?? 0) > 0 && master.getMaxPhyOffset() > connection().transferOffset + 3 * BIG) break
    }
    const blockedAt = connection().transferOffset
    expect(connection().queuedBytes).toBeGreaterThan(0)
    // Retention deletes the file being sent and the next one (the blocked frame may end a file).
    const cut = blockedAt - (blockedAt % BIG) + 2 * BIG
    expect(cut).toBeLessThan(master.getMaxPhyOffset() - (master.getMaxPhyOffset() % BIG))
    await waitFor(() => master.stats().commitLogFlushedOffset === master.getMaxPhyOffset(), 'the master to flush')
    const history = commitLogBytes(masterDir, 0, cut, BIG)
    ageFilesBelow(masterDir, cut)
    await retain(master, cut)
    proxy.heal()
    await waitFor(
      () => master.stats().ha.closedConnections.some((c) => /retention deleted the bytes the slave needs next/.test(c.reason)),
      'the master to close the connection',
    )
    expect(masterLogs.some((line) => /retention deleted the bytes the slave needs next/.test(line))).toBe(true)
    // The slave comes back asking for what it lacks; the master refuses it, and the slave says why.
    await waitFor(
      () =>
        master.stats().ha.closedConnections.some((c) => /which the master no longer has \(its commit log starts at \d+\)/.test(c.reason)),
      'the refusal',
    )
    await waitFor(
      () => /without sending a frame for offset \d+: it no longer has those bytes/.test(slave.stats().ha.slave?.notConnectedReason ?? ''),
      'the slave to say why',
    )
    expect(slaveLogs.some((line) => /no longer has those bytes \(deleted by retention\)/.test(line))).toBe(true)
    const stuck = slave.getMaxPhyOffset()
    expect(stuck).toBeLessThan(cut)
    // What it has is the master's, byte for byte, as it was before retention.
    expect(commitLogBytes(slaveDir, 0, stuck, BIG).equals(history.subarray(0, stuck))).toBe(true)
  })
})
