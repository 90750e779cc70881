// SYNC_MASTER: a put resolves PUT_OK only once a slave acknowledged its end; without a slave,
// or with one too far behind, SLAVE_NOT_AVAILABLE at once; a slave that stops acknowledging,
// FLUSH_SLAVE_TIMEOUT after syncFlushTimeout.
import * as net from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import type { MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { closeAll, messages, openStore, waitFor } from './ha-helpers.js'

const sockets: net.Socket[] = []
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy()
  await closeAll()
})

async function syncMaster(over = {}): Promise<{ master: MessageStore; port: number }> {
  const master = await openStore(tempDir('mqstore-ha-sync-'), {
    brokerRole: 'SYNC_MASTER',
    haListenPort: 0,
    syncFlushTimeout: 1_000,
    ...over,
  })
  return { master, port: master.stats().ha.port as number }
}

function report(offset: number): Buffer {
  const b = Buffer.alloc(8)
  b.writeBigInt64BE(BigInt(offset))
  return b
}

describe('SYNC_MASTER', () => {
  it('answers SLAVE_NOT_AVAILABLE at once without a slave; the message is stored', async () => {
    const { master } = await syncMaster()
    const [result] = await master.putMessages(messages(1))
    expect(result.status).toBe('SLAVE_NOT_AVAILABLE')
    expect(result.isOk()).toBe(true)
    expect(result.reason).toMatch(/no slave/)
    expect(master.getMaxOffsetInQueue('orders', 0)).toBe(1)
    // WAIT=false does not wait for a slave.
    const [noWait] = await master.putMessages([{ ...messages(1)[0], properties: { WAIT: 'false' } }])
    expect(noWait.status).toBe('PUT_OK')
  })

  it('with SYNC_FLUSH, single puts of one turn go as one batch and each counts as a group-commit request', async () => {
    const { master } = await syncMaster({ flushDiskType: 'SYNC_FLUSH' })
    const before = master.stats().groupCommitRequestsTotal
    const results = await Promise.all(messages(10).map((m) => master.putMessage(m)))
    expect(results.map((r) => r.status)).toEqual(results.map(() => 'SLAVE_NOT_AVAILABLE'))
    for (let i = 1; i < results.length; i++) expect(results[i].wroteOffset).toBeGreaterThan(results[i - 1].wroteOffset)
    expect(master.stats().groupCommitRequestsTotal - before).toBe(10)
  })

  it('resolves every PUT_OK once the slave has its bytes, one wait per batch', async () => {
    const { master, port } = await syncMaster({ flushDiskType: 'SYNC_FLUSH' })
    const slave = await openStore(tempDir('mqstore-ha-sync-slave-'), { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${port}` })
    await waitFor(() => master.stats().ha.connections[0]?.ackOffset >= 0, 'the slave')
    const all = messages(600)
    for (let i = 0; i < all.length; i += 20) {
      const batch = i % 40 === 0 ? all.slice(i, i + 20) : [all[i]]
      const results = await master.putMessages(batch)
      for (const r of results) {
        expect(r.status).toBe('PUT_OK')
        expect(slave.getMaxPhyOffset()).toBeGreaterThanOrEqual(r.wroteOffset + r.wroteBytes)
      }
    }
    // Concurrent batches each get their own answer.
    const together = await Promise.all([master.putMessages(messages(10, 'a')), master.putMessages(messages(10, 'b'))])
    expect(together.flat().every((r) => r.status === 'PUT_OK')).toBe(true)
  })

  it('answers FLUSH_SLAVE_TIMEOUT when the slave stops acknowledging, SLAVE_NOT_AVAILABLE when it is too far behind', async () => {
    const { master, port } = await syncMaster({ syncFlushTimeout: 300 })
    await master.putMessages(messages(5))
    // A slave that reports once and then never again.
    const socket = net.connect({ host: '127.0.0.1', port })
    sockets.push(socket)
    socket.on('data', () => {})
    socket.on('error', () => {})
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.write(report(master.getMaxPhyOffset()))
    await waitFor(() => master.stats().ha.connections[0]?.ackOffset >= 0, 'the report')
    const [late] = await master.putMessages(messages(1))
    expect(late.status).toBe('FLUSH_SLAVE_TIMEOUT')
    expect(late.reason).toMatch(/syncFlushTimeout \(300 ms\)/)
    socket.write(report(master.getMaxPhyOffset()))
    await waitFor(() => master.stats().ha.connections[0]?.ackOffset === master.getMaxPhyOffset(), 'the ack')
    const { master: strict, port: strictPort } = await syncMaster({ haSlaveFallbehindMax: 1000 })
    await strict.putMessages(messages(50))
    const far = net.connect({ host: '127.0.0.1', port: strictPort })
    sockets.push(far)
    far.on('data', () => {})
    far.on('error', () => {})
    await new Promise((resolve) => far.once('connect', resolve))
    far.write(report(0))
    await waitFor(() => strict.stats().ha.connections[0]?.ackOffset === 0, 'the report')
    const [behind] = await strict.putMessages(messages(1))
    expect(behind.status).toBe('SLAVE_NOT_AVAILABLE')
  })

  it('after the slave goes away, puts fail with the documented statuses, then PUT_OK once it is back', async () => {
    const { master, port } = await syncMaster({ syncFlushTimeout: 500 })
    const slaveDir = tempDir('mqstore-ha-sync-slave-')
    const slave = await openStore(slaveDir, { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${port}` })
    await waitFor(() => master.stats().ha.connections[0]?.ackOffset >= 0, 'the slave')
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => master.putMessages(messages(5, `before-${i}`))))
    expect(results.flat().every((r) => r.status === 'PUT_OK')).toBe(true)
    const stop = slave.close()
    const during = await master.putMessages(messages(5, 'during'))
    await stop
    for (const r of during) expect(['PUT_OK', 'FLUSH_SLAVE_TIMEOUT', 'SLAVE_NOT_AVAILABLE']).toContain(r.status)
    await waitFor(() => master.stats().ha.connections.length === 0, 'the connection to end')
    const [without] = await master.putMessages(messages(1, 'without'))
    expect(without.status).toBe('SLAVE_NOT_AVAILABLE')
    const back = await openStore(slaveDir, { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${port}` })
    await waitFor(() => master.stats().ha.connections[0]?.ackOffset >= 0, 'the slave back')
    const [again] = await master.putMessages(messages(1, 'again'))
    expect(again.status).toBe('PUT_OK')
    expect(back.getMaxPhyOffset()).toBeGreaterThanOrEqual(again.wroteOffset + again.wroteBytes)
  })
})
