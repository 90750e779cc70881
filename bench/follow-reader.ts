// The child of the benchmark's 'follow' phase: a read-only opener in another process than the
// writer. It consumes one queue from its end at start, records for each message the time from its put (the
// body's first 8 bytes: the writer's wall-clock time in ms, sub-ms precise) to its arrival here,
// then waits idle and measures its own CPU time, and prints one JSON line:
//   {"latenciesMs": [...], "idleCpuPercent": n}
//   node dist/bench/follow-reader.js <dir> <topic> <count> <idleMs>
import { MessageStore } from '../lib/index.js'

const [dir, topic, countText, idleText] = process.argv.slice(2)
const count = Number(countText)
const idleMs = Number(idleText)
if (dir === undefined || topic === undefined || !Number.isSafeInteger(count) || count <= 0 || !Number.isSafeInteger(idleMs)) {
  process.stderr.write('usage: follow-reader.js <dir> <topic> <count> <idleMs>\n')
  process.exit(64)
}

/** Wall-clock milliseconds with the monotonic clock's precision (comparable across processes). */
const wallMs = (): number => performance.timeOrigin + performance.now()

const reader = await MessageStore.open(dir, { readOnly: true })
const controller = new AbortController()
const sub = reader.consume({ group: 'follow', topic, queueId: 0, from: 'latest', signal: controller.signal })
// Tell the writer once this consumer waits: the puts start then.
const ready = setInterval(() => {
  if (reader.stats().waitingQueues > 0) {
    clearInterval(ready)
    process.stdout.write('ready\n')
  }
}, 5)
const latenciesMs: number[] = []
for await (const m of sub) {
  latenciesMs.push(wallMs() - m.body.readDoubleBE(0))
  if (latenciesMs.length === count) break
}
// Waiting again, with nothing arriving: what a follower costs at rest.
const idle = reader.consume({ group: 'follow', topic, queueId: 0, from: 'latest', signal: controller.signal })
const idleLoop = (async () => {
  for await (const _ of idle) {
    // nothing arrives
  }
})()
await new Promise((resolve) => setTimeout(resolve, 50))
const before = process.cpuUsage()
const started = performance.now()
await new Promise((resolve) => setTimeout(resolve, idleMs))
const used = process.cpuUsage(before)
const idleCpuPercent = ((used.user + used.system) / 1000 / (performance.now() - started)) * 100
controller.abort()
await idleLoop
await reader.close()
process.stdout.write(`${JSON.stringify({ latenciesMs, idleCpuPercent })}\n`)
