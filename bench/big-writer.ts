// The child of the benchmark's 'big' phase: fills a store with the workload's messages until its
// commit log holds `bytes`, prints how many messages it put, and kills itself with SIGKILL, so
// the parent measures a real crash recovery.
//   node dist/bench/big-writer.js <dir> <bytes>
import { MessageStore, type Message } from '../lib/index.js'
import { keyOf, makeBodies, PUT_BATCH, queueOf, topicOf } from './workload.js'

const [dir, bytesText] = process.argv.slice(2)
const target = Number(bytesText)
if (dir === undefined || !Number.isSafeInteger(target) || target <= 0) {
  process.stderr.write('usage: big-writer.js <dir> <bytes>\n')
  process.exit(64)
}

const store = await MessageStore.open(dir, { flushDiskType: 'ASYNC_FLUSH', messageIndexEnable: true })
let count = 0
while (store.stats().commitLogMaxOffset < target) {
  const bodies = makeBodies(count, PUT_BATCH)
  const batch: Message[] = bodies.map((body, j) => ({
    topic: topicOf(count + j),
    queueId: queueOf(count + j),
    body,
    keys: keyOf(count + j),
  }))
  for (const r of await store.putMessages(batch)) if (r.status !== 'PUT_OK') throw new Error(`put: ${r.status}`)
  count += PUT_BATCH
}
// Every put is readable (dispatched) before the crash, as an application would have seen it.
store.getMaxOffsetInQueue(topicOf(0), queueOf(0))
process.stdout.write(`${count}\n`, () => process.kill(process.pid, 'SIGKILL'))
