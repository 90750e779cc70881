// The transactional-outbox pattern with an embedded store: an HTTP handler records an event and
// answers only once it is on disk; a relay drains the outbox and hands each event on.
//
// POST /orders       stores an "order-created" event (SYNC_FLUSH: the 201 means it is durable)
// GET  /orders/<id>  finds the event by key through the store's hash index
//
// The relay consumes the outbox as group "relay", "publishes" each event (here it only counts
// them; a real relay would call a broker or a webhook), and commits after publishing, so an event
// is delivered at least once across restarts. The server listens on 127.0.0.1 only.
//
// By default the example drives itself: it sends --requests orders to its own server, waits until
// the relay has published them all, then stops and prints a JSON summary. --serve keeps it running
// (try: curl -XPOST localhost:PORT/orders -d '{"item":"book"}') until Ctrl-C.
//
//   npm run build:ts && node examples/outbox.mjs --dir ./data/outbox --requests 200
import { once } from 'node:events'
import { createServer } from 'node:http'
import { parseArgs } from 'node:util'

import { MessageStore } from 'mqstore'

const { values } = parseArgs({
  options: {
    dir: { type: 'string', default: './data/example-outbox' },
    requests: { type: 'string', default: '200' },
    serve: { type: 'boolean', default: false },
    'timeout-ms': { type: 'string', default: '30000' },
  },
})
const REQUESTS = Number(values.requests)
const OUTBOX = 'outbox'

const store = await MessageStore.open(values.dir, { flushDiskType: 'SYNC_FLUSH' })
const stop = new AbortController()
process.once('SIGINT', () => stop.abort())
process.once('SIGTERM', () => stop.abort())

// ---- the HTTP handler writes the outbox --------------------------------------------------------
let nextOrder = 0
async function handle(req, res) {
  const reply = (status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify(body))
  }
  if (req.method === 'POST' && req.url === '/orders') {
    let text = ''
    for await (const chunk of req) text += chunk
    let order
    try {
      order = JSON.parse(text || '{}')
    } catch {
      return reply(400, { error: 'the body must be JSON' })
    }
    const id = `order-${process.pid}-${Date.now().toString(36)}-${nextOrder++}`
    const event = { type: 'order-created', id, order, at: new Date().toISOString() }
    const result = await store.putMessage({ topic: OUTBOX, queueId: 0, body: JSON.stringify(event), tags: event.type, keys: [id] })
    if (result.status !== 'PUT_OK') return reply(503, { error: `not stored: ${result.status}` })
    return reply(201, { id, msgId: result.msgId })
  }
  const match = /^\/orders\/([\w-]+)$/.exec(req.url ?? '')
  if (req.method === 'GET' && match !== null) {
    const found = store.queryMessage(OUTBOX, match[1], 1, 0, Date.now() + 1000).messages[0]
    return found === undefined ? reply(404, { error: 'no such order' }) : reply(200, JSON.parse(found.body.toString('utf8')))
  }
  reply(404, { error: 'not found' })
}

const server = createServer((req, res) => {
  handle(req, res).catch((error) => {
    res.writeHead(500)
    res.end(String(error?.message ?? error))
  })
})
server.listen(0, '127.0.0.1')
await once(server, 'listening')
const { port } = server.address()

// ---- the relay drains the outbox ----------------------------------------------------------------
let published = 0
const publishedIds = new Set()
let allPublished = () => {}
const drained = new Promise((resolve) => (allPublished = resolve))
async function relay() {
  const subscription = store.consume({ group: 'relay', topic: OUTBOX, queueId: 0, signal: stop.signal })
  for await (const message of subscription) {
    const event = JSON.parse(message.body.toString('utf8'))
    publishedIds.add(event.id) // "publish": hand the event to the outside world
    published++
    await subscription.commit() // only after publishing, and on disk when it resolves: at-least-once
    if (!values.serve && published === REQUESTS) allPublished()
  }
}
const relaying = relay()

if (values.serve) {
  console.error(`outbox example listening on http://127.0.0.1:${port} (Ctrl-C to stop)`)
  await once(stop.signal, 'abort')
} else {
  const timer = setTimeout(() => stop.abort(new Error('timed out')), Number(values['timeout-ms']))
  // Eight clients post the orders concurrently, as a small load would.
  const ids = []
  let sent = 0
  const client = async () => {
    while (sent < REQUESTS) {
      sent++
      const response = await fetch(`http://127.0.0.1:${port}/orders`, {
        method: 'POST',
        body: JSON.stringify({ item: `item-${sent}`, quantity: 1 }),
      })
      if (response.status !== 201) throw new Error(`POST /orders: ${response.status} ${await response.text()}`)
      ids.push((await response.json()).id)
    }
  }
  await Promise.all(Array.from({ length: 8 }, client))
  const lookup = await fetch(`http://127.0.0.1:${port}/orders/${ids[0]}`)
  const firstFound = lookup.status === 200 && (await lookup.json()).id === ids[0]
  await Promise.race([drained, once(stop.signal, 'abort')])
  clearTimeout(timer)
  stop.abort()
  const everyIdPublished = ids.every((id) => publishedIds.has(id))
  console.log(
    JSON.stringify({ accepted: ids.length, published, everyIdPublished, firstFound, committed: store.queryOffset('relay', OUTBOX, 0) }),
  )
  process.exitCode = ids.length === REQUESTS && everyIdPublished && firstFound ? 0 : 1
}

stop.abort()
server.close()
await relaying
await store.close()
