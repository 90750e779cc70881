// An mqstore master and an mqstore slave in two processes (the compiled package, `npm run
// build:ts`): the slave is SIGKILLed mid-stream and restarted, recovers like any store, resumes
// from its recovered end, and ends with the master's commit log byte for byte from its start.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach, expect, it } from 'vitest'
import { MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { commitLogBytes, JsonLinesChild, waitFor } from './ha-helpers.js'

const CHILD = fileURLToPath(new URL('../fixtures/ha-child.mjs', import.meta.url))
const SIZES = { mappedFileSizeCommitLog: 256 * 1024, mappedFileSizeConsumeQueue: 20 * 4096, maxHashSlotNum: 4096, maxIndexNum: 65536 }
const TOTAL = 20_000

const children: JsonLinesChild[] = []
afterEach(async () => {
  for (const child of children.splice(0)) await child.stop('SIGKILL')
})

function start(...args: string[]): JsonLinesChild {
  const child = new JsonLinesChild(spawn(process.execPath, [CHILD, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }))
  children.push(child)
  return child
}

it('replicates between two processes through a SIGKILL of the slave', { timeout: 180_000 }, async () => {
  const masterDir = tempDir('mqstore-ha-proc-master-')
  const slaveDir = tempDir('mqstore-ha-proc-slave-')
  const master = start('master', masterDir, String(TOTAL))
  await waitFor(() => master.find((l) => l.port !== undefined) !== undefined, 'the master port', 60_000)
  const address = `127.0.0.1:${master.find((l) => l.port !== undefined)?.port}`
  let slave = start('slave', slaveDir, address)
  await waitFor(() => (slave.last().max ?? 0) > 100_000, 'the slave to receive bytes', 60_000)
  await slave.stop('SIGKILL')
  slave = start('slave', slaveDir, address)
  await waitFor(() => master.find((l) => l.done) !== undefined, 'the master to finish', 120_000)
  const end = master.find((l) => l.done)?.end as number
  await waitFor(() => slave.last().max === end && slave.last().behind === 0, 'the slave to catch up', 120_000)
  await slave.stop('SIGTERM')
  await master.stop('SIGTERM')

  const a = await MessageStore.open(masterDir, SIZES)
  const b = await MessageStore.open(slaveDir, SIZES)
  try {
    // The slave started at the start of the master's last file when it first connected.
    const from = b.getMinPhyOffset()
    expect(from % SIZES.mappedFileSizeCommitLog).toBe(0)
    expect(from).toBeLessThan(end - 100_000)
    expect(b.getMaxPhyOffset()).toBe(end)
    expect(
      commitLogBytes(slaveDir, from, end, SIZES.mappedFileSizeCommitLog).equals(
        commitLogBytes(masterDir, from, end, SIZES.mappedFileSizeCommitLog),
      ),
    ).toBe(true)
    for (const topic of ['orders', 'payments', 'audit']) {
      for (let queueId = 0; queueId < 4; queueId++)
        expect(b.getMaxOffsetInQueue(topic, queueId)).toBe(a.getMaxOffsetInQueue(topic, queueId))
    }
    for (const j of [TOTAL - 300, TOTAL - 2, TOTAL - 1]) {
      const topic = ['orders', 'payments', 'audit'][j % 3]
      expect(a.getLatestByKey(topic, `key-${j}`)?.commitLogOffset).toBeGreaterThanOrEqual(from)
      expect(b.getLatestByKey(topic, `key-${j}`)?.body.toString()).toBe(a.getLatestByKey(topic, `key-${j}`)?.body.toString())
    }
  } finally {
    await a.close()
    await b.close()
  }
})

it('SYNC_MASTER: every PUT_OK survives a SIGKILL of the slave, puts then fail as documented and succeed once it is back', {
  timeout: 180_000,
}, async () => {
  const masterDir = tempDir('mqstore-ha-proc-sync-')
  const slaveDir = tempDir('mqstore-ha-proc-sync-slave-')
  const master = await MessageStore.open(masterDir, { ...SIZES, brokerRole: 'SYNC_MASTER', haListenPort: 0, syncFlushTimeout: 1_000 })
  try {
    const address = `127.0.0.1:${master.stats().ha.port}`
    let slave = start('slave', slaveDir, address)
    await waitFor(() => master.stats().ha.connections[0]?.ackOffset >= 0, 'the slave', 60_000)
    let ackedEnd = 0
    const statuses = new Set<string>()
    let killed = false
    let n = 0
    const kill = (async () => {
      await waitFor(() => ackedEnd > 50_000, 'some acknowledged puts', 60_000)
      await slave.stop('SIGKILL')
      killed = true
    })()
    while (!killed || statuses.size < 2) {
      const results = await master.putMessages(
        Array.from({ length: 10 }, () => ({ topic: 'sync', queueId: n % 2, body: Buffer.from(`sync-${n++}`), keys: `sync-${n}` })),
      )
      for (const r of results) {
        if (!killed) expect(r.status).toBe('PUT_OK')
        if (r.status === 'PUT_OK') ackedEnd = Math.max(ackedEnd, r.wroteOffset + r.wroteBytes)
        else {
          expect(['FLUSH_SLAVE_TIMEOUT', 'SLAVE_NOT_AVAILABLE']).toContain(r.status)
          statuses.add(r.status)
        }
      }
      if (killed && statuses.has('SLAVE_NOT_AVAILABLE')) break
    }
    await kill
    // The killed slave's files hold every byte it acknowledged (acknowledged = in its page cache).
    const look = await MessageStore.open(slaveDir, SIZES)
    expect(look.getMaxPhyOffset()).toBeGreaterThanOrEqual(ackedEnd)
    await look.close()
    slave = start('slave', slaveDir, address)
    await waitFor(() => master.stats().ha.connections[0]?.ackOffset >= 0, 'the slave back', 60_000)
    const [again] = await master.putMessages([{ topic: 'sync', queueId: 0, body: Buffer.from('again') }])
    expect(again.status).toBe('PUT_OK')
    await slave.stop('SIGTERM')
  } finally {
    await master.close()
  }
})
