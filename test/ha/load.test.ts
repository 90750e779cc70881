// 100,000 messages from an mqstore master to an mqstore slave, each in its own process (the
// compiled package, `npm run build:ts`): five topics, eight queues, two keys and a tag each, puts in
// batches. The slave connects after the first messages, so it starts at the master's last file then
// (RocketMQ's rule); from there its commit log equals the master's byte for byte, and it serves the
// same messages by queue and by key.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach, expect, it } from 'vitest'
import { type MessageExt, MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { commitLogBytes, JsonLinesChild, readQueue, waitFor } from './ha-helpers.js'

const CHILD = fileURLToPath(new URL('./load-child.mjs', import.meta.url))
// As in load-child.mjs.
const TOPICS = ['orders', 'payments', 'audit', 'events', 'metrics']
const QUEUES = 8
const SIZES = { mappedFileSizeCommitLog: 1024 * 1024, mappedFileSizeConsumeQueue: 6000 * 20, maxHashSlotNum: 50_000, maxIndexNum: 200_000 }
const TOTAL = 100_000
const BEFORE_SLAVE = 10_000

const children: JsonLinesChild[] = []
afterEach(async () => {
  for (const child of children.splice(0)) await child.stop('SIGKILL')
})

function start(...args: string[]): JsonLinesChild {
  const child = new JsonLinesChild(spawn(process.execPath, [CHILD, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }))
  children.push(child)
  return child
}

const shape = (m: MessageExt) =>
  `${m.topic}/${m.queueId}@${m.queueOffset}:${m.commitLogOffset}:${m.tags}:${m.keys.join(',')}:${m.bodyCRC}:${m.body.length}`

it('replicates 100,000 messages between two processes', { timeout: 300_000 }, async () => {
  const masterDir = tempDir('mqstore-ha-load-master-')
  const slaveDir = tempDir('mqstore-ha-load-slave-')
  const master = start('master', masterDir, String(TOTAL), String(BEFORE_SLAVE))
  await waitFor(() => master.lines.some((l) => l.port !== undefined), 'the master port', 60_000)
  const slave = start('slave', slaveDir, `127.0.0.1:${master.lines.find((l) => l.port !== undefined)?.port}`)
  await waitFor(() => master.lines.some((l) => l.done), 'the master to finish', 180_000)
  const end = master.lines.find((l) => l.done)?.end as number
  await waitFor(() => slave.lines.at(-1)?.max === end && slave.lines.at(-1)?.behind === 0, 'the slave to catch up', 180_000)
  await slave.stop('SIGTERM')
  await master.stop('SIGTERM')

  const a = await MessageStore.open(masterDir, SIZES)
  const b = await MessageStore.open(slaveDir, SIZES)
  try {
    const from = b.getMinPhyOffset()
    expect(from % SIZES.mappedFileSizeCommitLog).toBe(0)
    expect(from).toBeGreaterThan(0)
    expect(end - from).toBeGreaterThan(end / 2)
    expect(b.getMaxPhyOffset()).toBe(end)
    expect(
      commitLogBytes(slaveDir, from, end, SIZES.mappedFileSizeCommitLog).equals(
        commitLogBytes(masterDir, from, end, SIZES.mappedFileSizeCommitLog),
      ),
    ).toBe(true)
    // By queue: the slave serves exactly the master's messages stored from its start on.
    let served = 0
    for (const topic of TOPICS) {
      for (let queueId = 0; queueId < QUEUES; queueId++) {
        const expected = readQueue(a, topic, queueId).filter((m) => m.commitLogOffset >= from)
        const onSlave = readQueue(b, topic, queueId)
        expect(onSlave.map(shape)).toEqual(expected.map(shape))
        expect(b.getMaxOffsetInQueue(topic, queueId)).toBe(a.getMaxOffsetInQueue(topic, queueId))
        served += onSlave.length
      }
    }
    expect(served).toBeGreaterThan(TOTAL / 2)
    // By key: every seventh message's own key, and a shared key.
    for (let j = 0; j < TOTAL; j += 7) {
      const topic = TOPICS[j % TOPICS.length]
      const onMaster = a.queryMessage(topic, `key-${j}`, 4).messages
      expect(onMaster).toHaveLength(1)
      const onSlave = b.queryMessage(topic, `key-${j}`, 4).messages
      expect(onSlave.map(shape)).toEqual(onMaster[0].commitLogOffset >= from ? [shape(onMaster[0])] : [])
    }
    const shared = (s: MessageStore) => s.queryMessage('orders', 'group-5', 1000, 0, Number.MAX_SAFE_INTEGER).messages
    expect(new Set(shared(b).map(shape))).toEqual(
      new Set(
        shared(a)
          .filter((m) => m.commitLogOffset >= from)
          .map(shape),
      ),
    )
    expect(
      b.getLatestByKey('metrics', `key-${TOTAL - 1}`)?.body.equals(a.getLatestByKey('metrics', `key-${TOTAL - 1}`)?.body as Buffer),
    ).toBe(true)
  } finally {
    await a.close()
    await b.close()
  }
})
