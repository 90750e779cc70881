// A store's metrics for Prometheus on an HTTP /metrics endpoint (127.0.0.1), with prom-client.
//
// The program opens a store, exports it with collectStoreMetrics into its own registry, serves
// GET /metrics, puts --count messages and reads them back, then scrapes itself once and prints a
// one-line JSON summary of what the scrape said. With --serve it keeps serving until Ctrl-C, for
// `curl 127.0.0.1:PORT/metrics` or a Prometheus scrape job.
//
//   npm install prom-client
//   npm run build:ts && node examples/metrics.mjs --dir ./data/metrics --count 500
import { createServer } from 'node:http'
import { once } from 'node:events'
import { parseArgs } from 'node:util'

import { Registry } from 'prom-client'
import { MessageStore } from 'mqstore'
import { collectStoreMetrics } from 'mqstore/metrics'

const { values } = parseArgs({
  options: {
    dir: { type: 'string', default: './data/example-metrics' },
    count: { type: 'string', default: '500' },
    port: { type: 'string', default: '0' },
    serve: { type: 'boolean', default: false },
  },
})
const COUNT = Number(values.count)

const store = await MessageStore.open(values.dir)
const registry = new Registry()
const metrics = collectStoreMetrics(store, { register: registry, labels: { store: 'orders' } })

const server = createServer(async (req, res) => {
  if (req.method !== 'GET' || req.url !== '/metrics') {
    res.writeHead(404).end()
    return
  }
  try {
    const body = await registry.metrics()
    res.writeHead(200, { 'Content-Type': registry.contentType }).end(body)
  } catch (error) {
    res.writeHead(500).end(String(error))
  }
})
server.listen(Number(values.port), '127.0.0.1')
await once(server, 'listening')
const { port } = server.address()

for (let i = 0; i < COUNT; i++) {
  const result = await store.putMessage({ topic: 'orders', queueId: i % 4, body: JSON.stringify({ order: i }) })
  if (result.status !== 'PUT_OK') throw new Error(`put failed: ${result.status}`)
}
for (let queueId = 0; queueId < 4; queueId++) store.getMessage('metrics-example', 'orders', queueId, 0, 32)

const response = await fetch(`http://127.0.0.1:${port}/metrics`)
const text = await response.text()
const seriesValue = (series) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? null : Number(line.slice(series.length + 1))
}

if (values.serve) {
  console.error(`serving http://127.0.0.1:${port}/metrics (Ctrl-C to stop)`)
  await Promise.race([once(process, 'SIGINT'), once(process, 'SIGTERM')])
}
server.close()
metrics.remove()
await store.close()
console.log(
  JSON.stringify({
    status: response.status,
    contentType: response.headers.get('content-type'),
    putMessages: seriesValue('mqstore_put_messages_total{store="orders"}'),
    getMessages: seriesValue('mqstore_get_messages_total{store="orders"}'),
    putLatencyCount: seriesValue('mqstore_put_latency_seconds_count{store="orders"}'),
    open: seriesValue('mqstore_open{store="orders"}'),
  }),
)
