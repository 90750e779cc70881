// Several processes, one store: the node:cluster primary owns the store (opened with
// { shareWrites: true }), and each worker produces through MessageStore.connect(), its puts
// forwarded to the primary and acknowledged once they are on disk (SYNC_FLUSH). When every worker
// is done, the primary checks that each acknowledged order is in the store, closes it and prints a
// one-line JSON summary.
//
//   npm run build:ts && node examples/cluster.mjs --dir ./data/cluster --workers 4 --count 500
import cluster from 'node:cluster'
import { parseArgs } from 'node:util'

import { MessageStore } from 'mqstore'

const { values } = parseArgs({
  options: {
    dir: { type: 'string', default: './data/example-cluster' },
    workers: { type: 'string', default: '4' },
    count: { type: 'string', default: '500' },
  },
})
const WORKERS = Number(values.workers)
const COUNT = Number(values.count)
const QUEUES = 4

if (cluster.isPrimary) {
  const store = await MessageStore.open(values.dir, { shareWrites: true, flushDiskType: 'SYNC_FLUSH' })
  const acknowledged = []
  const exits = []
  for (let i = 0; i < WORKERS; i++) {
    const worker = cluster.fork({ WORKER_INDEX: String(i) })
    worker.on('message', (message) => acknowledged.push(...message.acknowledged))
    exits.push(new Promise((resolve) => worker.once('exit', resolve)))
  }
  await Promise.all(exits)
  // Every order a worker was told is stored can be read back by the offset it was given.
  const everyOrderFound = acknowledged.every(({ id, wroteOffset }) => {
    const message = store.lookMessageByOffset(wroteOffset)
    return message !== null && Buffer.from(message.body).toString() === id
  })
  const forwarded = store.stats().sharing?.forwardedPuts
  await store.close()
  console.log(JSON.stringify({ workers: WORKERS, acknowledged: acknowledged.length, forwarded, everyOrderFound }))
} else {
  const index = Number(process.env.WORKER_INDEX)
  const producer = await MessageStore.connect(values.dir)
  const acknowledged = []
  // Puts pipeline over the connection: ten in flight at a time, some of them batches.
  for (let n = 0; n < COUNT; n += 10) {
    const ids = Array.from({ length: Math.min(10, COUNT - n) }, (_, i) => `order-${index}-${n + i}`)
    const single = ids.slice(0, 5).map((id) => producer.putMessage({ topic: 'orders', queueId: index % QUEUES, body: id, keys: id }))
    const batch = producer.putMessages(ids.slice(5).map((id) => ({ topic: 'orders', queueId: index % QUEUES, body: id, keys: id })))
    const results = [...(await Promise.all(single)), ...(await batch)]
    results.forEach((result, i) => {
      if (result.status === 'PUT_OK') acknowledged.push({ id: ids[i], wroteOffset: result.wroteOffset })
    })
  }
  await producer.close()
  process.send({ acknowledged }, () => process.disconnect())
}
