// The replication metrics of `mqstore/metrics`: the role, each slave's lag on the master, the
// lag and connection of a slave, and its reconnections, read from stats().ha at each scrape.
import * as net from 'node:net'
import { Registry } from 'prom-client'
import { afterEach, expect, it } from 'vitest'
import { collectStoreMetrics } from '../../lib/metrics.js'
import { tempDir } from '../helpers/tmp.js'
import { caughtUp, closeAll, messages, openStore, waitFor } from './ha-helpers.js'

const sockets: net.Socket[] = []
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy()
  await closeAll()
})

async function scrape(registry: Registry): Promise<Map<string, number>> {
  const samples = new Map<string, number>()
  for (const line of (await registry.metrics()).split('\n')) {
    if (line === '' || line.startsWith('#') || !line.includes('_ha_')) continue
    const at = line.lastIndexOf(' ')
    samples.set(line.slice(0, at), Number(line.slice(at + 1)))
  }
  return samples
}

it('exports the role, the lag per slave, the slave lag and connection, and reconnects', async () => {
  const registry = new Registry()
  const master = await openStore(tempDir('mqstore-ha-metrics-'), { haListenPort: 0 })
  const port = master.stats().ha.port as number
  const slave = await openStore(tempDir('mqstore-ha-metrics-'), { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${port}` })
  collectStoreMetrics(master, { register: registry, labels: { store: 'a' } })
  collectStoreMetrics(slave, { register: registry, labels: { store: 'b' } })
  await master.putMessages(messages(500))
  await waitFor(() => caughtUp(slave, master), 'the slave')
  await waitFor(() => master.stats().ha.connections[0]?.lagBytes === 0, 'its ack')

  // A second slave that reports 0 and reads nothing: it lacks the whole log.
  const lagging = net.connect({ host: '127.0.0.1', port })
  sockets.push(lagging)
  lagging.on('error', () => {})
  await new Promise((resolve) => lagging.once('connect', resolve))
  lagging.write(Buffer.alloc(8))
  await waitFor(
    () => master.stats().ha.connections.length === 2 && master.stats().ha.connections.every((c) => c.ackOffset >= 0),
    'its report',
  )
  const end = master.getMaxPhyOffset()
  const peer = `127.0.0.1:${lagging.localPort}`

  let samples = await scrape(registry)
  expect(samples.get('mqstore_ha_role{store="a",role="ASYNC_MASTER"}')).toBe(1)
  expect(samples.get('mqstore_ha_role{store="a",role="SLAVE"}')).toBe(0)
  expect(samples.get('mqstore_ha_role{store="b",role="SLAVE"}')).toBe(1)
  expect(samples.get('mqstore_ha_connected_slaves{store="a"}')).toBe(2)
  expect(samples.get(`mqstore_ha_slave_lag_bytes{store="a",peer="${peer}"}`)).toBe(end)
  const lags = [...samples].filter(([key]) => key.startsWith('mqstore_ha_slave_lag_bytes{store="a"'))
  expect(lags.map(([, value]) => value).sort((x, y) => x - y)).toEqual([0, end])
  expect(samples.get('mqstore_ha_master_lag_bytes{store="b"}')).toBe(0)
  expect(samples.get('mqstore_ha_master_connected{store="b"}')).toBe(1)
  expect(samples.get('mqstore_ha_reconnects_total{store="b"}')).toBe(0)
  // A master has no master: no sample.
  expect(samples.has('mqstore_ha_master_connected{store="a"}')).toBe(false)

  await master.close()
  await waitFor(() => slave.stats().ha.reconnects >= 2, 'a reconnect attempt')
  samples = await scrape(registry)
  expect(samples.get('mqstore_ha_master_connected{store="b"}')).toBe(0)
  expect(samples.get('mqstore_ha_reconnects_total{store="b"}')).toBe(slave.stats().ha.reconnects)

  // A promotion keeps the count.
  const reconnects = slave.stats().ha.reconnects
  await slave.setBrokerRole('ASYNC_MASTER')
  samples = await scrape(registry)
  expect(samples.get('mqstore_ha_role{store="b",role="ASYNC_MASTER"}')).toBe(1)
  expect(samples.get('mqstore_ha_reconnects_total{store="b"}')).toBeGreaterThanOrEqual(reconnects)
  expect(samples.has('mqstore_ha_master_lag_bytes{store="b"}')).toBe(false)
})
