// The processes of the 100,000-message replication test (test/ha/load.test.ts), one JSON line per event:
//
//   node load-child.mjs master <store dir> <messages> <before>
//     opens an ASYNC_MASTER on an ephemeral port and prints {"port":N}; puts <before> messages,
//     waits for a slave's first report, puts the rest (five topics, eight queues, keys and tags,
//     batches of 200), prints {"done":true,"end":max offset} and closes on SIGTERM.
//   node load-child.mjs slave <store dir> <host:port>
//     opens a SLAVE of that master and prints {"max":offset,"behind":bytes} every 100 ms; closes on SIGTERM.
//
// Imports the compiled package (dist/, built by `npm run build:ts`).
import { MessageStore } from '../../dist/lib/index.js'

const TOPICS = ['orders', 'payments', 'audit', 'events', 'metrics']
const QUEUES = 8
const SIZES = { mappedFileSizeCommitLog: 1024 * 1024, mappedFileSizeConsumeQueue: 6000 * 20, maxHashSlotNum: 50_000, maxIndexNum: 200_000 }

/** Message j: its topic and queue, two keys (its own and a shared one), one of three tags, 20 to 620 bytes of body. */
function message(j) {
  return {
    topic: TOPICS[j % TOPICS.length],
    queueId: (j >> 1) % QUEUES,
    body: Buffer.from(`load-${j}-${'z'.repeat((j * 37) % 600)}`),
    keys: [`key-${j}`, `group-${j % 500}`],
    tags: ['red', 'green', 'blue'][j % 3],
  }
}

const [mode, dir, arg, before] = process.argv.slice(2)
if (mode === 'master' || mode === 'slave') {
  const say = (object) => process.stdout.write(`${JSON.stringify(object)}\n`)
  const closeOnTerm = (store) => {
    process.once('SIGTERM', async () => {
      await store.close()
      process.exit(0)
    })
  }
  if (mode === 'master') {
    const store = await MessageStore.open(dir, { ...SIZES, haListenPort: 0 })
    closeOnTerm(store)
    say({ port: store.stats().ha.port })
    const total = Number(arg)
    const put = async (from, to) => {
      for (let i = from; i < to; i += 200) {
        const batch = []
        for (let j = i; j < Math.min(to, i + 200); j++) batch.push(message(j))
        const results = await store.putMessages(batch)
        const bad = results.find((r) => r.status !== 'PUT_OK')
        if (bad !== undefined) throw new Error(`put failed: ${bad.status}`)
        // Let the slave's connection be served while puts go on.
        await new Promise((resolve) => setImmediate(resolve))
      }
    }
    await put(0, Number(before))
    while (!store.stats().ha.connections.some((c) => c.ackOffset >= 0)) await new Promise((resolve) => setTimeout(resolve, 20))
    await put(Number(before), total)
    say({ done: true, end: store.getMaxPhyOffset() })
  } else {
    const store = await MessageStore.open(dir, { ...SIZES, brokerRole: 'SLAVE', haMasterAddress: arg })
    closeOnTerm(store)
    setInterval(() => say({ max: store.getMaxPhyOffset(), behind: store.stats().dispatchBehindBytes }), 100)
  }
}
