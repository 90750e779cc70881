// An mqstore master and an mqstore slave in one process, over loopback: the slave's commit log is
// the master's byte for byte from its start, and it serves the same messages by queue and by key.
import { afterEach, describe, expect, it } from 'vitest'
import { MQStoreError } from '../../lib/errors.js'
import { MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { caughtUp, closeAll, commitLogBytes, FILE, messages, openStore, waitFor } from './ha-helpers.js'

afterEach(closeAll)

async function pair(masterOver = {}, slaveOver = {}) {
  const masterDir = tempDir('mqstore-ha-master-')
  const slaveDir = tempDir('mqstore-ha-slave-')
  const master = await openStore(masterDir, { haListenPort: 0, ...masterOver })
  const port = master.stats().ha.port as number
  const slave = await openStore(slaveDir, { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${port}`, ...slaveOver })
  return { master, slave, masterDir, slaveDir, port }
}

describe('replication between two mqstore stores', () => {
  it('copies the commit log byte for byte and serves the same messages by queue and by key', async () => {
    const { master, slave, masterDir, slaveDir } = await pair()
    const all = messages(3000)
    for (let i = 0; i < all.length; i += 100) {
      const results = await master.putMessages(all.slice(i, i + 100))
      expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
    }
    const end = master.getMaxPhyOffset()
    expect(end).toBeGreaterThan(3 * FILE)
    await waitFor(() => caughtUp(slave, end), 'the slave to catch up')
    // A slave that reported 0 got the master's history from the start here: the master's only
    // file was its first when the slave connected.
    const start = slave.getMinPhyOffset()
    expect(start).toBe(0)
    expect(commitLogBytes(slaveDir, start, end).equals(commitLogBytes(masterDir, start, end))).toBe(true)
    for (const topic of ['orders', 'payments', 'audit']) {
      for (let queueId = 0; queueId < 4; queueId++) {
        expect(slave.getMaxOffsetInQueue(topic, queueId)).toBe(master.getMaxOffsetInQueue(topic, queueId))
        const a = master.getMessage('g', topic, queueId, 0, 32)
        const b = slave.getMessage('g', topic, queueId, 0, 32)
        expect(b.messages.map((m) => m.body.toString())).toEqual(a.messages.map((m) => m.body.toString()))
      }
    }
    expect(slave.getLatestByKey('payments', 'm-key-2998')?.body.toString()).toBe(all[2998].body.toString())
    expect(slave.queryMessage('audit', 'm-key-5', 10).messages).toHaveLength(1)
    const stats = master.stats().ha
    expect(stats.role).toBe('ASYNC_MASTER')
    expect(stats.connections).toHaveLength(1)
    await waitFor(() => master.stats().ha.connections[0]?.ackOffset === end, 'the ack')
    expect(master.stats().ha.connections[0].lagBytes).toBe(0)
    const slaveStats = slave.stats().ha
    expect(slaveStats.role).toBe('SLAVE')
    expect(slaveStats.slave?.connected).toBe(true)
    expect(slaveStats.slave?.lastOffsetReceived).toBe(end)
    // Failover by hand: the slave's directory reopened as a master takes puts from its end.
    await slave.close()
    const promoted = await openStore(slaveDir)
    const [put] = await promoted.putMessages([{ topic: 'orders', queueId: 0, body: Buffer.from('after failover') }])
    expect(put.status).toBe('PUT_OK')
    expect(put.wroteOffset).toBe(end)
    expect(put.queueOffset).toBe(master.getMaxOffsetInQueue('orders', 0))
  })

  it('starts a new slave at the start of the master last file', async () => {
    const masterDir = tempDir('mqstore-ha-master-')
    const master = await openStore(masterDir, { haListenPort: 0 })
    await master.putMessages(messages(2000, 'old'))
    const lastFile = master.getMaxPhyOffset() - (master.getMaxPhyOffset() % FILE)
    expect(lastFile).toBeGreaterThan(0)
    const slaveDir = tempDir('mqstore-ha-slave-')
    const slave = await openStore(slaveDir, { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${master.stats().ha.port}` })
    // The transfer starts where the master's last file starts when the slave's first report arrives.
    // (It reports 0, then the ends of what it appended, which may come before this looks.)
    await waitFor(() => (master.stats().ha.connections[0]?.ackOffset ?? -1) >= 0, 'the first report')
    await master.putMessages(messages(500, 'new'))
    const end = master.getMaxPhyOffset()
    await waitFor(() => caughtUp(slave, end), 'the slave to catch up')
    expect(slave.getMinPhyOffset()).toBe(lastFile)
    // Its flush runs as on any store, from the first file's start.
    await waitFor(() => slave.stats().commitLogFlushedOffset === end, 'the slave to flush')
    expect(commitLogBytes(slaveDir, lastFile, end).equals(commitLogBytes(masterDir, lastFile, end))).toBe(true)
    expect(slave.getLatestByKey('payments', 'new-key-499')?.body.toString()).toBe(messages(500, 'new')[499].body.toString())
    // Reopened, the slave keeps its non-zero start and resumes from its end.
    await slave.close()
    const again = await openStore(slaveDir, { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${master.stats().ha.port}` })
    expect(again.getMinPhyOffset()).toBe(lastFile)
    await master.putMessages(messages(300, 'after'))
    const end2 = master.getMaxPhyOffset()
    await waitFor(() => caughtUp(again, end2), 'the reopened slave to catch up')
    expect(commitLogBytes(slaveDir, lastFile, end2).equals(commitLogBytes(masterDir, lastFile, end2))).toBe(true)
    expect(again.getLatestByKey('orders', 'after-key-297')).not.toBeNull()
  })

  it('refuses puts on a slave with the reason, and reconnects after the master returns', async () => {
    const { master, slave, masterDir, port } = await pair()
    const [refused] = await slave.putMessages([{ topic: 't', queueId: 0, body: Buffer.from('x') }])
    expect(refused.status).toBe('SERVICE_NOT_AVAILABLE')
    expect(refused.reason).toMatch(/SLAVE/)
    await master.putMessages(messages(100))
    await waitFor(() => caughtUp(slave, master), 'the slave to catch up')
    await master.close()
    await waitFor(() => slave.stats().ha.slave?.connected === false, 'the slave to notice')
    expect(slave.stats().ha.slave?.notConnectedReason).toMatch(/master/)
    const back = await openStore(masterDir, { haListenPort: port })
    await back.putMessages(messages(100, 'back'))
    await waitFor(() => caughtUp(slave, back), 'the slave to reconnect and catch up')
    expect(slave.stats().ha.slave?.reconnects).toBeGreaterThan(0)
    expect(slave.getLatestByKey('orders', 'back-key-99')).not.toBeNull()
  })

  it('checks the replication options', async () => {
    const dir = tempDir('mqstore-ha-options-')
    const bad: [Record<string, unknown>, string][] = [
      [{ brokerRole: 'LEADER' }, 'brokerRole'],
      [{ haListenPort: 70000 }, 'haListenPort'],
      [{ haListenPort: -1 }, 'haListenPort'],
      [{ haListenHost: 'localhost' }, 'haListenHost'],
      [{ haAllowedAddresses: ['not an ip'] }, 'haAllowedAddresses'],
      [{ brokerRole: 'SLAVE' }, 'haMasterAddress'],
      [{ brokerRole: 'SLAVE', haMasterAddress: 'nohost' }, 'haMasterAddress'],
      [{ brokerRole: 'SYNC_MASTER' }, 'haListenPort'],
      [{ haSendHeartbeatInterval: 0 }, 'haSendHeartbeatInterval'],
      [{ haHousekeepingInterval: 1.5 }, 'haHousekeepingInterval'],
      [{ haTransferBatchSize: 8 * 1024 * 1024 }, 'haTransferBatchSize'],
      [{ haSlaveFallbehindMax: '1' }, 'haSlaveFallbehindMax'],
    ]
    for (const [options, name] of bad) {
      const error = await MessageStore.open(dir, options).catch((e: unknown) => e)
      expect(error, name).toBeInstanceOf(MQStoreError)
      expect((error as MQStoreError).code).toBe('INVALID_OPTION')
      expect((error as Error).message).toContain(name)
    }
    const error = await MessageStore.open(dir, { brokerRol: 'SLAVE' } as never).catch((e: unknown) => e)
    expect((error as Error).message).toContain("did you mean 'brokerRole'")
    // A port already taken is an IO_ERROR naming it, and the directory is free again.
    const first = await openStore(tempDir('mqstore-ha-options-'), { haListenPort: 0 })
    const taken = first.stats().ha.port as number
    const busyDir = tempDir('mqstore-ha-options-')
    const busy = await MessageStore.open(busyDir, { haListenPort: taken }).catch((e: unknown) => e)
    expect((busy as MQStoreError).code).toBe('IO_ERROR')
    expect((busy as Error).message).toContain(`cannot listen for slaves on 127.0.0.1:${taken}`)
    await (await MessageStore.open(busyDir)).close()
    const plain = await openStore(dir)
    expect(plain.stats().ha).toMatchObject({ role: 'ASYNC_MASTER', host: null, port: null, connections: [], slave: null })
  })
})
