// The child of the benchmark's 'forward' phase: a producer in another process than the writer.
// It connects to the store (opened by the parent with shareWrites), forwards messages
// [first, first + count) in putMessages batches, and prints the seconds from its first put to its
// last result.
//   node dist/bench/forward-producer.js <dir> <first> <count>
import { MessageStore, type Message } from '../lib/index.js'
import { keyOf, makeBodies, now, PUT_BATCH, queueOf, secondsSince, topicOf } from './workload.js'

const [dir, firstText, countText] = process.argv.slice(2)
const first = Number(firstText)
const count = Number(countText)
if (dir === undefined || !Number.isSafeInteger(first) || !Number.isSafeInteger(count) || count <= 0) {
  process.stderr.write('usage: forward-producer.js <dir> <first> <count>\n')
  process.exit(64)
}

const producer = await MessageStore.connect(dir)
const started = now()
for (let at = first; at < first + count; at += PUT_BATCH) {
  const n = Math.min(PUT_BATCH, first + count - at)
  const batch: Message[] = makeBodies(at, n).map((body, j) => ({
    topic: topicOf(at + j),
    queueId: queueOf(at + j),
    body,
    keys: keyOf(at + j),
  }))
  for (const r of await producer.putMessages(batch)) if (r.status !== 'PUT_OK') throw new Error(`forwarded put: ${r.status} ${r.reason}`)
}
const seconds = secondsSince(started)
await producer.close()
process.stdout.write(`${seconds}\n`)
