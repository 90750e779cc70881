// setBrokerRole on a live store: a slave promoted takes puts from its end (a torn tail cut first);
// a master joins another master as its slave, refusing while its log holds bytes the new master
// lacks and cutting them only with truncateToMaster; bad arguments are INVALID_OPTION.
import * as net from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { MQStoreError } from '../../lib/errors.js'
import { readHaRole } from '../../lib/store/ha/ha-role-file.js'
import type { MessageStore } from '../../lib/store/message-store.js'
import { join } from 'node:path'
import { tempDir } from '../helpers/tmp.js'
import { caughtUp, closeAll, commitLogBytes, FILE, messages, openStore, waitFor } from './ha-helpers.js'

const servers: net.Server[] = []
const sockets: net.Socket[] = []
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy()
  for (const server of servers.splice(0)) server.close()
  await closeAll()
})

const quick = { haSendHeartbeatInterval: 200, haHousekeepingInterval: 5_000 }

function logged(into: string[]) {
  return { logger: (level: string, message: string) => into.push(`${level} ${message}`) }
}

/** A master A with a slave B that is given an HA port for when it is promoted, both caught up on `count` messages. */
async function pair(count: number) {
  const aDir = tempDir('mqstore-ha-a-')
  const bDir = tempDir('mqstore-ha-b-')
  const aLogs: string[] = []
  const bLogs: string[] = []
  const a = await openStore(aDir, { haListenPort: 0, ...quick, ...logged(aLogs) })
  const aAddress = `127.0.0.1:${a.stats().ha.port}`
  const b = await openStore(bDir, { brokerRole: 'SLAVE', haMasterAddress: aAddress, haListenPort: 0, ...quick, ...logged(bLogs) })
  expect(b.stats().ha.port).toBeNull()
  for (let i = 0; i < count; i += 50) await a.putMessages(messages(Math.min(50, count - i), `a${i}`))
  await waitFor(() => caughtUp(b, a), 'the slave to catch up')
  return { a, b, aDir, bDir, aLogs, bLogs, aAddress }
}

function sameQueues(x: MessageStore, y: MessageStore): void {
  for (const topic of ['orders', 'payments', 'audit']) {
    for (let queueId = 0; queueId < 4; queueId++) {
      expect(x.getMaxOffsetInQueue(topic, queueId), `${topic}/${queueId}`).toBe(y.getMaxOffsetInQueue(topic, queueId))
      const mx = x.getMessage('g', topic, queueId, 0, 64).messages
      const my = y.getMessage('g', topic, queueId, 0, 64).messages
      expect(mx.map((m) => m.body.toString())).toEqual(my.map((m) => m.body.toString()))
    }
  }
}

describe('setBrokerRole: promotion', () => {
  it('promotes a slave: it stops replicating, listens on its port and takes puts from its end', async () => {
    const { a, b, bDir } = await pair(300)
    const end = a.getMaxPhyOffset()
    await b.setBrokerRole('ASYNC_MASTER')
    const ha = b.stats().ha
    expect(ha.role).toBe('ASYNC_MASTER')
    expect(ha.slave).toBeNull()
    expect(ha.port).toBeGreaterThan(0)
    expect(readHaRole(join(bDir, 'config', 'haRole.json'))).toEqual({ brokerRole: 'ASYNC_MASTER', haListen: `127.0.0.1:${ha.port}` })
    const before = b.getMaxOffsetInQueue('orders', 0)
    const [put] = await b.putMessages([{ topic: 'orders', queueId: 0, body: Buffer.from('first on b'), keys: 'b-first' }])
    expect(put.status).toBe('PUT_OK')
    expect(put.wroteOffset).toBe(end)
    expect(put.queueOffset).toBe(before)
    expect(b.getLatestByKey('orders', 'b-first')?.body.toString()).toBe('first on b')
    // The old master no longer feeds it.
    await a.putMessages(messages(10, 'late'))
    expect(b.getLatestByKey('orders', 'late-key-0')).toBeNull()
    // SYNC_MASTER is a master role too; promoting twice is harmless.
    await b.setBrokerRole('SYNC_MASTER')
    expect(b.stats().ha.role).toBe('SYNC_MASTER')
    const [unreplicated] = await b.putMessages(messages(1, 'sync'))
    expect(unreplicated.status).toBe('SLAVE_NOT_AVAILABLE')
    await b.setBrokerRole('ASYNC_MASTER')
    expect(b.stats().ha.port).toBe(ha.port)
  })

  it('a slave reopened and then promoted takes each queue offset from where its queue ends', async () => {
    const { a, b, bDir, aAddress } = await pair(100)
    // Reopened, it knows the queues' ends at open; then it replicates more.
    await b.close()
    const again = await openStore(bDir, { brokerRole: 'SLAVE', haMasterAddress: aAddress, haListenPort: 0, ...quick })
    await a.putMessages(messages(100, 'more'))
    await waitFor(() => caughtUp(again, a), 'the reopened slave')
    await again.setBrokerRole('ASYNC_MASTER')
    for (let queueId = 0; queueId < 4; queueId++) {
      const end = a.getMaxOffsetInQueue('payments', queueId)
      const [put] = await again.putMessages([{ topic: 'payments', queueId, body: Buffer.from(`next ${queueId}`) }])
      expect(put.queueOffset).toBe(end)
      expect(again.getMessage('g', 'payments', queueId, end, 1).messages[0]?.body.toString()).toBe(`next ${queueId}`)
    }
  })

  it('is promoted even when its HA port cannot be bound, and says so', async () => {
    // Its master holds the port it was given.
    const master = await openStore(tempDir('mqstore-ha-port-'), { haListenPort: 0 })
    const taken = master.stats().ha.port as number
    const c = await openStore(tempDir('mqstore-ha-port-'), {
      brokerRole: 'SLAVE',
      haMasterAddress: `127.0.0.1:${taken}`,
      haListenPort: taken,
    })
    const error = await c.setBrokerRole('SYNC_MASTER').catch((e: unknown) => e)
    expect((error as MQStoreError).code).toBe('IO_ERROR')
    expect((error as Error).message).toContain(`127.0.0.1:${taken}`)
    expect(c.stats().ha).toMatchObject({ role: 'SYNC_MASTER', port: null, slave: null })
    const [put] = await c.putMessages(messages(1))
    expect(put.status).toBe('SLAVE_NOT_AVAILABLE')
  })

  it('cuts a torn tail no frame will complete before it takes puts', async () => {
    // The log of a real master, fed by a test peer that stops in the middle of a record.
    const source = await openStore(tempDir('mqstore-ha-src-'))
    const sent = messages(200, 'torn')
    await source.putMessages(sent)
    const sourceDir = source.storePath
    const end = source.getMaxPhyOffset()
    await source.close()
    const log = commitLogBytes(sourceDir, 0, end)
    // The last record's start, walking the records by their sizes.
    let at = 0
    let last = 0
    while (at < end) {
      last = at
      at += log.readInt32BE(at)
    }
    const cutAt = last + 20
    const server = net.createServer((socket) => {
      sockets.push(socket)
      socket.once('data', () => {
        const header = Buffer.alloc(12)
        header.writeBigInt64BE(0n)
        header.writeInt32BE(cutAt, 8)
        socket.write(Buffer.concat([header, log.subarray(0, cutAt)]))
      })
      socket.on('error', () => {})
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const port = (server.address() as net.AddressInfo).port
    const logs: string[] = []
    const slave = await openStore(tempDir('mqstore-ha-torn-'), {
      brokerRole: 'SLAVE',
      haMasterAddress: `127.0.0.1:${port}`,
      ...logged(logs),
    })
    await waitFor(() => slave.getMaxPhyOffset() === cutAt, 'the torn bytes')
    await waitFor(() => slave.stats().dispatchBehindBytes === 20, 'dispatch up to the torn record')
    expect(slave.getLatestByKey(sent[198].topic, sent[198].keys)).not.toBeNull()
    await slave.setBrokerRole('ASYNC_MASTER')
    expect(slave.getMaxPhyOffset()).toBe(last)
    expect(logs.join('\n')).toMatch(new RegExp(`cut the torn tail from ${last} to ${cutAt}`))
    const [put] = await slave.putMessages([{ ...sent[199], body: Buffer.from('again') }])
    expect(put.status).toBe('PUT_OK')
    expect(put.wroteOffset).toBe(last)
    // The torn record never reached its queue: the put takes its queue offset.
    expect(put.queueOffset).toBe(sent.slice(0, 199).filter((m) => m.topic === sent[199].topic && m.queueId === sent[199].queueId).length)
    expect(slave.getLatestByKey(sent[199].topic, sent[199].keys)?.body.toString()).toBe('again')
  })
})

describe('setBrokerRole: a master joins another master', () => {
  it('follows the new master when its log is a prefix of the new master', async () => {
    const { a, b, aDir, bDir } = await pair(200)
    await b.setBrokerRole('ASYNC_MASTER')
    const bAddress = `127.0.0.1:${b.stats().ha.port}`
    await b.putMessages(messages(100, 'b'))
    await a.setBrokerRole('SLAVE', { haMasterAddress: bAddress })
    expect(readHaRole(join(aDir, 'config', 'haRole.json'))).toEqual({ brokerRole: 'SLAVE', haMasterAddress: bAddress })
    await waitFor(() => caughtUp(a, b), 'a to follow b')
    expect(a.stats().ha.slave?.status).toBe('replicating')
    expect(a.stats().ha.port).toBeNull()
    const end = b.getMaxPhyOffset()
    expect(commitLogBytes(aDir, 0, end).equals(commitLogBytes(bDir, 0, end))).toBe(true)
    sameQueues(a, b)
    const [refused] = await a.putMessages(messages(1))
    expect(refused.status).toBe('SERVICE_NOT_AVAILABLE')
    expect(refused.reason).toContain(bAddress)
  })

  // [case, messages the old master took alone, messages the new one took, old master ends past the new one]
  const cases: [string, number, number, boolean][] = [
    ['ahead of the new master', 40, 5, true],
    ['behind the new master but diverged from it', 40, 400, false],
    ['ahead of a new master that took nothing', 40, 0, true],
    ['ahead by more than its first probe', 500, 5, true],
    ['diverged from before its first probe', 500, 1000, false],
  ]
  for (const [name, lost, taken, ahead] of cases) {
    it(`refuses when it is ${name}, and cuts back only with truncateToMaster`, async () => {
      const { a, b, aDir, bDir, aLogs } = await pair(200)
      const common = b.getMaxPhyOffset()
      await b.setBrokerRole('ASYNC_MASTER')
      const bAddress = `127.0.0.1:${b.stats().ha.port}`
      // The old master took puts its slave never got; the new one took others.
      for (let i = 0; i < lost; i += 100) await a.putMessages(messages(Math.min(100, lost - i), `lost${i}`))
      for (let i = 0; i < taken; i += 100) await b.putMessages(messages(Math.min(100, taken - i), `b${i}`))
      const aEnd = a.getMaxPhyOffset()
      expect(aEnd > b.getMaxPhyOffset()).toBe(ahead)
      await a.setBrokerRole('SLAVE', { haMasterAddress: bAddress })
      await waitFor(() => a.stats().ha.slave?.status === 'refused', 'the refusal')
      const reason = a.stats().ha.slave?.notConnectedReason ?? ''
      expect(reason).toContain(`from offset ${common} to ${aEnd}`)
      expect(reason).toContain('truncateToMaster')
      expect(aLogs.join('\n')).toContain('replication refused')
      // Nothing was cut.
      expect(a.getMaxPhyOffset()).toBe(aEnd)
      expect(a.getLatestByKey('orders', 'lost0-key-39')).not.toBeNull()
      await a.setBrokerRole('SLAVE', { haMasterAddress: bAddress, truncateToMaster: true })
      await b.putMessages(messages(10, 'after'))
      await waitFor(() => caughtUp(a, b), 'a to follow b')
      expect(aLogs.join('\n')).toContain(`cutting the log back from ${aEnd} to ${common}`)
      const end = b.getMaxPhyOffset()
      expect(commitLogBytes(aDir, 0, end).equals(commitLogBytes(bDir, 0, end))).toBe(true)
      sameQueues(a, b)
      expect(a.getLatestByKey('orders', 'lost0-key-39')).toBeNull()
      expect(a.getLatestByKey('orders', 'after-key-9')?.body.toString()).toBe(messages(10, 'after')[9].body.toString())
      expect(a.stats().ha.slave?.status).toBe('replicating')
    })
  }

  it('cuts the compaction logs of compacted topics with the rest', async () => {
    const { a, b, aLogs } = await pair(0)
    for (const store of [a, b]) await store.setTopicConfig('orders', { cleanupPolicy: 'compact' })
    for (let i = 0; i < 200; i += 50) await a.putMessages(messages(50, `c${i}`))
    await waitFor(() => caughtUp(b, a), 'the slave')
    await b.setBrokerRole('ASYNC_MASTER')
    await a.putMessages(messages(60, 'lost'))
    await b.putMessages(messages(30, 'b'))
    const lostOrders = a.getMessage('g', 'orders', 0, 0, 64).messages.filter((m) => m.body.toString().startsWith('lost'))
    expect(lostOrders.length).toBeGreaterThan(0)
    await a.setBrokerRole('SLAVE', { haMasterAddress: `127.0.0.1:${b.stats().ha.port}`, truncateToMaster: true })
    await b.putMessages(messages(30, 'after'))
    await waitFor(() => caughtUp(a, b), 'a to follow b')
    expect(aLogs.join('\n')).toContain('the log was cut back to')
    sameQueues(a, b)
    for (let queueId = 0; queueId < 4; queueId++) {
      const bodies = a.getMessage('g', 'orders', queueId, 0, 64).messages.map((m) => m.body.toString())
      expect(bodies.some((body) => body.startsWith('lost'))).toBe(false)
      expect(bodies.some((body) => body.startsWith('after'))).toBe(true)
    }
  })

  it('refuses a master it shares no record with; truncateToMaster replaces its whole log', async () => {
    const aDir = tempDir('mqstore-ha-apart-')
    const cDir = tempDir('mqstore-ha-apart-')
    const logs: string[] = []
    const a = await openStore(aDir, { ...quick, ...logged(logs) })
    await a.putMessages(messages(100, 'mine'))
    const c = await openStore(cDir, { haListenPort: 0, ...quick })
    await c.putMessages(messages(400, 'theirs'))
    const cAddress = `127.0.0.1:${c.stats().ha.port}`
    await a.setBrokerRole('SLAVE', { haMasterAddress: cAddress })
    await waitFor(() => a.stats().ha.slave?.status === 'refused', 'the refusal')
    expect(a.stats().ha.slave?.notConnectedReason).toContain(`from offset 0 to ${a.getMaxPhyOffset()}`)
    expect(a.stats().ha.slave?.notConnectedReason).toContain('no whole record')
    await a.setBrokerRole('SLAVE', { haMasterAddress: cAddress, truncateToMaster: true })
    await waitFor(() => caughtUp(a, c), 'a to follow c')
    // Emptied, it started over as a new slave does: at the start of the master's last file.
    const end = c.getMaxPhyOffset()
    const from = a.getMinPhyOffset()
    expect(from).toBe(end - (end % FILE))
    expect(from).toBeGreaterThan(0)
    expect(commitLogBytes(aDir, from, end).equals(commitLogBytes(cDir, from, end))).toBe(true)
    expect(a.getMaxOffsetInQueue('audit', 3)).toBe(c.getMaxOffsetInQueue('audit', 3))
    expect(a.getLatestByKey('orders', 'mine-key-0')).toBeNull()
    expect(a.getLatestByKey('audit', 'theirs-key-398')?.body.toString()).toBe(messages(400, 'theirs')[398].body.toString())
  })

  it('a store opened as SLAVE of a master behind it refuses, and cuts nothing', async () => {
    const aDir = tempDir('mqstore-ha-behind-')
    const a = await openStore(aDir)
    await a.putMessages(messages(100, 'mine'))
    const end = a.getMaxPhyOffset()
    await a.close()
    const c = await openStore(tempDir('mqstore-ha-behind-'), { haListenPort: 0, ...quick })
    await c.putMessages(messages(10, 'theirs'))
    const logs: string[] = []
    const slave = await openStore(aDir, { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${c.stats().ha.port}`, ...logged(logs) })
    await waitFor(() => slave.stats().ha.slave?.status === 'refused', 'the refusal')
    expect(slave.stats().ha.slave?.notConnectedReason).toContain(`below the slave's end ${end}`)
    expect(logs.join('\n')).toContain('replication refused')
    expect(slave.getMaxPhyOffset()).toBe(end)
  })

  it('fails SYNC_MASTER puts still waiting for a slave when the store becomes a slave', async () => {
    const aDir = tempDir('mqstore-ha-sync-')
    const a = await openStore(aDir, { brokerRole: 'SYNC_MASTER', haListenPort: 0, syncFlushTimeout: 60_000 })
    const port = a.stats().ha.port as number
    await a.putMessages(messages(5))
    // A slave that reports once and then says nothing: the put waits for it.
    const silent = net.connect({ host: '127.0.0.1', port })
    sockets.push(silent)
    silent.on('error', () => {})
    silent.resume()
    await new Promise((resolve) => silent.once('connect', resolve))
    const report = Buffer.alloc(8)
    report.writeBigInt64BE(BigInt(a.getMaxPhyOffset()))
    silent.write(report)
    await waitFor(() => a.stats().ha.connections[0]?.ackOffset === a.getMaxPhyOffset(), 'the report')
    const waiting = a.putMessages(messages(1, 'waiting'))
    const other = await openStore(tempDir('mqstore-ha-other-'), { haListenPort: 0 })
    await a.setBrokerRole('SLAVE', { haMasterAddress: `127.0.0.1:${other.stats().ha.port}` })
    const [result] = await waiting
    expect(result.status).toBe('SLAVE_NOT_AVAILABLE')
    await waitFor(() => silent.destroyed || silent.readableEnded, 'the server to close')
    expect(a.stats().ha).toMatchObject({ role: 'SLAVE', port: null, connections: [] })
  })
})

describe('setBrokerRole: arguments', () => {
  it('answers INVALID_OPTION with the option name', async () => {
    const store = await openStore(tempDir('mqstore-ha-args-'))
    const bad: [unknown, unknown, string][] = [
      ['BOSS', {}, 'brokerRole'],
      ['SLAVE', {}, 'haMasterAddress'],
      ['SLAVE', { haMasterAddress: 'no port' }, 'haMasterAddress'],
      ['SLAVE', { haMasterAddress: '127.0.0.1:1', truncateToMaster: 'yes' }, 'truncateToMaster'],
      ['ASYNC_MASTER', { haMasterAddress: '127.0.0.1:1' }, 'haMasterAddress'],
      ['ASYNC_MASTER', { truncateToMaster: true }, 'truncateToMaster'],
      ['SYNC_MASTER', {}, 'haListenPort'],
      ['SLAVE', { haMasterAddress: '127.0.0.1:1', truncate: true }, 'truncate'],
      ['SLAVE', null, 'options'],
    ]
    for (const [role, options, name] of bad) {
      const error = await store.setBrokerRole(role as never, options as never).catch((e: unknown) => e)
      expect(error, name).toBeInstanceOf(MQStoreError)
      expect((error as MQStoreError).code).toBe('INVALID_OPTION')
      expect((error as Error).message).toContain(name)
    }
    expect(store.stats().ha.role).toBe('ASYNC_MASTER')
    // A change asked for while the store closes is refused; close waits for one under way.
    const other = await openStore(tempDir('mqstore-ha-args-'), { haListenPort: 0 })
    const during = store.setBrokerRole('SLAVE', { haMasterAddress: `127.0.0.1:${other.stats().ha.port}` })
    const closing = store.close()
    const late = store.setBrokerRole('ASYNC_MASTER').catch((e: unknown) => e)
    await during
    await closing
    expect(((await late) as MQStoreError).code).toBe('STORE_CLOSED')
    const closed = await store.setBrokerRole('ASYNC_MASTER').catch((e: unknown) => e)
    expect((closed as MQStoreError).code).toBe('STORE_CLOSED')
  })
})
