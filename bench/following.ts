// The benchmark's 'follow' phase: how soon a read-only opener in another process sees what the
// writer puts. The writer (this process) puts one message at a time with a pause of a few ms
// between puts, so that each finds the reader waiting (asleep); the reader consumes the queue and
// records each message's put-to-arrival time. One untimed put before the reader starts makes the
// queue and its first file. Then the reader waits idle and reports its CPU use.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

import { MessageStore, type OpenOptions } from '../lib/index.js'
import { check, log, makeTempDir, removeDir, type FollowResult } from './workload.js'

/** Messages followed: enough for a p99, a few seconds at most. */
const FOLLOW_MAX = 1000
/** How long the reader waits with nothing arriving while its CPU time is measured. */
const IDLE_MS = 2000
const TOPIC = 'follow'

export async function followLatency(config: { count: number }, common: OpenOptions): Promise<FollowResult> {
  const count = Math.max(10, Math.min(config.count, FOLLOW_MAX))
  const dir = makeTempDir('mqstore-follow')
  try {
    const store = await MessageStore.open(dir, { ...common, flushDiskType: 'ASYNC_FLUSH' })
    try {
      log(`mqstore: ${count} messages put one at a time, followed by a reader in another process`)
      // The queue and its first file exist before the timed puts: the figure is following, not creating a queue.
      check((await store.putMessage({ topic: TOPIC, queueId: 0, body: Buffer.alloc(64) })).status === 'PUT_OK', 'the first put failed')
      const child = runReaderChild(dir, count)
      await child.ready
      for (let n = 0; n < count; n++) {
        // 1-5 ms apart, not in step with any timer of the reader.
        await new Promise((resolve) => setTimeout(resolve, 1 + (n % 5)))
        const body = Buffer.alloc(64)
        body.writeDoubleBE(performance.timeOrigin + performance.now(), 0)
        const r = await store.putMessage({ topic: TOPIC, queueId: 0, body })
        check(r.status === 'PUT_OK', `follow put: ${r.status}`)
      }
      const { latenciesMs, idleCpuPercent } = await child.done
      check(latenciesMs.length === count, `the reader saw ${latenciesMs.length} of ${count} messages`)
      const sorted = [...latenciesMs].sort((a, b) => a - b)
      const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
      return { count, latencyMs: { p50: at(0.5), p99: at(0.99), max: sorted[sorted.length - 1] }, idleCpuPercent, idleMs: IDLE_MS }
    } finally {
      await store.close()
    }
  } finally {
    removeDir(dir)
  }
}

/** Starts the reader child; `ready` once its consumer waits, `done` with what it measured. */
function runReaderChild(
  dir: string,
  count: number,
): { ready: Promise<void>; done: Promise<{ latenciesMs: number[]; idleCpuPercent: number }> } {
  const script = fileURLToPath(new URL('./follow-reader.js', import.meta.url))
  const child = spawn(process.execPath, [script, dir, TOPIC, String(count), String(IDLE_MS)], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  let onReady: () => void = () => {}
  const ready = new Promise<void>((resolve) => {
    onReady = resolve
  })
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString()
    if (out.includes('ready\n')) onReady()
  })
  const done = new Promise<{ latenciesMs: number[]; idleCpuPercent: number }>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      const last = out.trim().split('\n').pop() ?? ''
      if (code === 0 && last.startsWith('{')) resolve(JSON.parse(last))
      else reject(new Error(`the following reader ended with ${signal ?? `status ${code}`}: ${out}`))
    })
  })
  // A child that dies before it is ready must not leave the writer waiting.
  return { ready: Promise.race([ready, done.then(() => {})]), done }
}
