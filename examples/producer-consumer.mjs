// A producer service and a consumer service sharing one embedded store.
//
// The producer puts orders on topic "orders", spread over four queues by customer, each with its
// order id as key. The consumer runs one subscription per queue as group "billing"; consume() waits
// for new messages (no polling) and commits its offset as it goes, so a restart resumes where the
// last run stopped. The example stops by itself once the consumer has seen every order produced in
// this run (or on Ctrl-C), closes the store cleanly and prints a one-line JSON summary.
//
//   npm run build:ts && node examples/producer-consumer.mjs --dir ./data/orders --count 1000
import { parseArgs } from 'node:util'

import { MessageStore } from 'mqstore'

const { values } = parseArgs({
  options: {
    dir: { type: 'string', default: './data/example-orders' },
    count: { type: 'string', default: '1000' },
    'timeout-ms': { type: 'string', default: '30000' },
  },
})
const COUNT = Number(values.count)
const QUEUES = 4

const store = await MessageStore.open(values.dir)
const stop = new AbortController()
process.once('SIGINT', () => stop.abort())
process.once('SIGTERM', () => stop.abort())
// A bound, so that a bug cannot leave the example running forever.
let timedOut = false
const deadline = setTimeout(() => {
  timedOut = true
  stop.abort()
}, Number(values['timeout-ms']))

// ---- producer service -------------------------------------------------------------------------
async function produce() {
  let produced = 0
  for (let i = 0; i < COUNT && !stop.signal.aborted; i++) {
    const customer = `customer-${i % 10}`
    const order = { id: `order-${Date.now().toString(36)}-${i}`, customer, amountCents: 100 + (i % 50) }
    const result = await store.putMessage({
      topic: 'orders',
      queueId: i % QUEUES, // one customer's orders stay in one queue, hence in order
      body: JSON.stringify(order),
      tags: 'created',
      keys: [order.id],
    })
    if (result.status !== 'PUT_OK') throw new Error(`put failed: ${result.status}`)
    produced++
  }
  return produced
}

// ---- consumer service -------------------------------------------------------------------------
let consumed = 0
let billedCents = 0
async function consumeQueue(queueId) {
  const subscription = store.consume({ group: 'billing', topic: 'orders', queueId, signal: stop.signal, autoCommit: true })
  for await (const message of subscription) {
    const order = JSON.parse(message.body.toString('utf8'))
    billedCents += order.amountCents
    consumed++
    if (consumed === COUNT) stop.abort() // every order of this run is billed: stop the services
  }
}

const consumers = Array.from({ length: QUEUES }, (_, queueId) => consumeQueue(queueId))
const produced = await produce()
await Promise.all(consumers) // they end when stop aborts
clearTimeout(deadline)
const committed = Array.from({ length: QUEUES }, (_, q) => store.queryOffset('billing', 'orders', q))
await store.close()

console.log(JSON.stringify({ produced, consumed, billedCents, committed, timedOut }))
process.exitCode = consumed === produced && produced === COUNT ? 0 : 1
