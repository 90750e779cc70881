// One store in a child process for the failover test (test/ha/failover.test.ts), driven by JSON
// lines on stdin and answering with JSON lines on stdout (the store's log lines too):
//
//   {"open": options}                 opens the store in the directory given as argument
//   {"stream": {"prefix", "lanes"}}   puts batches of 5 messages on `lanes` concurrent loops until
//                                     killed, printing {"ok": [indices]} for each batch's PUT_OKs
//   {"put": {"prefix", "count"}}      puts `count` messages, prints {"put": statuses}
//   {"role": role, "options": {...}}  setBrokerRole, prints {"role", "ms", "max", "port"}
//   {"check": {"prefix", "indices"}}  prints {"missing": indices not found by key}
//   {"stats": true}                   prints {"max", "behind", "ha"}
//   {"close": true}                   closes the store and exits
//
// Imports the compiled package (dist/, built by `npm run build:ts`).
import * as readline from 'node:readline'
import { MessageStore } from '../../dist/lib/index.js'

const [dir] = process.argv.slice(2)
const say = (object) => process.stdout.write(`${JSON.stringify({ t: Date.now(), ...object })}\n`)
const sizes = { mappedFileSizeCommitLog: 256 * 1024, mappedFileSizeConsumeQueue: 20 * 4096, maxHashSlotNum: 4096, maxIndexNum: 65536 }
const logger = (level, message) => say({ log: `${level} ${message}` })
let store = null

function message(prefix, i) {
  return {
    topic: ['orders', 'payments', 'audit'][i % 3],
    queueId: i % 4,
    body: Buffer.from(`${prefix}-${i}-${'z'.repeat(i % 300)}`),
    keys: `${prefix}-${i}`,
    tags: i % 2 === 0 ? 'even' : 'odd',
  }
}

async function stream({ prefix, lanes }) {
  let next = 0
  const lane = async () => {
    for (;;) {
      const indices = [next, next + 1, next + 2, next + 3, next + 4]
      next += 5
      const results = await store.putMessages(indices.map((i) => message(prefix, i)))
      const ok = indices.filter((_, k) => results[k].status === 'PUT_OK')
      const end = Math.max(...results.map((r) => r.wroteOffset + r.wroteBytes))
      say({ ok, end, other: results.filter((r) => r.status !== 'PUT_OK').map((r) => r.status) })
    }
  }
  await Promise.all(Array.from({ length: lanes }, lane))
}

async function handle(command) {
  if (command.open !== undefined) {
    store = await MessageStore.open(dir, { ...sizes, ...command.open, logger })
    const stats = store.stats()
    say({ opened: true, port: stats.ha.port, min: store.getMinPhyOffset(), max: store.getMaxPhyOffset(), lastExitOK: stats.lastExitOK })
  } else if (command.stream !== undefined) {
    void stream(command.stream)
  } else if (command.put !== undefined) {
    const { prefix, count } = command.put
    const results = await store.putMessages(Array.from({ length: count }, (_, i) => message(prefix, i)))
    say({ put: results.map((r) => r.status), max: store.getMaxPhyOffset() })
  } else if (command.role !== undefined) {
    const began = Date.now()
    await store.setBrokerRole(command.role, command.options)
    say({ role: command.role, ms: Date.now() - began, max: store.getMaxPhyOffset(), port: store.stats().ha.port })
  } else if (command.check !== undefined) {
    const { prefix, indices } = command.check
    const missing = indices.filter((i) => {
      const m = message(prefix, i)
      return store.getLatestByKey(m.topic, m.keys)?.body.equals(m.body) !== true
    })
    say({ missing })
  } else if (command.stats !== undefined) {
    const stats = store.stats()
    say({ max: store.getMaxPhyOffset(), behind: stats.dispatchBehindBytes, ha: stats.ha })
  } else if (command.close !== undefined) {
    await store.close()
    say({ closed: true })
    process.exit(0)
  }
}

// Commands run one after another, in the order they came.
let queue = Promise.resolve()
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  queue = queue.then(() => handle(JSON.parse(line))).catch((error) => say({ error: String(error?.stack ?? error) }))
})
