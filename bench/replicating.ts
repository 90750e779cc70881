// The benchmark's 'replicate' phase: a master and a slave in two child processes over loopback
// (bench/replica-node.ts). An ASYNC_MASTER pair measures messages per second replicated (put in
// batches until the slave acknowledged their end), put latency one at a time, and the slave's lag
// under a steady load; then a SYNC_MASTER pair measures put latency the same way, so that the two
// latencies come from the same run.
import { type ChildProcess, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

import type { ReplicaReport } from './replica-node.js'
import { check, log, makeTempDir, PUT_BATCH, removeDir, type ReplicateResult } from './workload.js'

/** Messages replicated in batches: enough for a steady rate. */
const REPLICATE_MAX = 200_000
/** Puts timed one at a time per role. */
const LATENCY_MAX = 2_000
/** Seconds of steady load. */
const STEADY_SECONDS = 3

export async function replicatedPuts(config: { count: number }): Promise<ReplicateResult> {
  const count = Math.max(PUT_BATCH, Math.min(config.count, REPLICATE_MAX))
  const latencyCount = Math.max(100, Math.min(config.count, LATENCY_MAX))
  log(
    `mqstore: ${count} messages replicated to a slave in another process, then ${latencyCount} puts timed alone, then ${STEADY_SECONDS} s of steady load`,
  )
  const async = await runPair('ASYNC_MASTER', count, latencyCount, STEADY_SECONDS)
  log(`mqstore: ${latencyCount} puts timed alone on a SYNC_MASTER`)
  const sync = await runPair('SYNC_MASTER', 0, latencyCount, 0)
  check(async.steady !== null, 'the steady load was not measured')
  return {
    count,
    batch: PUT_BATCH,
    rate: async.replicatedRate,
    latencyCount,
    asyncLatencyUs: async.putLatencyUs,
    syncLatencyUs: sync.putLatencyUs,
    steady: async.steady,
  }
}

/** A master child with `role` and a slave child of it; resolves with what the master measured. */
async function runPair(
  role: 'ASYNC_MASTER' | 'SYNC_MASTER',
  count: number,
  latencyCount: number,
  steadySeconds: number,
): Promise<ReplicaReport> {
  const script = fileURLToPath(new URL('./replica-node.js', import.meta.url))
  const masterDir = makeTempDir('mqstore-replicate-master')
  const slaveDir = makeTempDir('mqstore-replicate-slave')
  const master = spawn(process.execPath, [script, 'master', masterDir, role, String(count), String(latencyCount), String(steadySeconds)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let slave: ChildProcess | null = null
  try {
    const lines: Record<string, unknown>[] = []
    let pending = ''
    master.stdout.on('data', (chunk: Buffer) => {
      pending += chunk.toString()
      const parts = pending.split('\n')
      pending = parts.pop() as string
      for (const part of parts) {
        if (part === '') continue
        const line = JSON.parse(part) as Record<string, unknown>
        lines.push(line)
        if (typeof line.port === 'number' && slave === null) {
          slave = spawn(process.execPath, [script, 'slave', slaveDir, `127.0.0.1:${line.port}`], { stdio: ['ignore', 'ignore', 'inherit'] })
        }
      }
    })
    await new Promise<void>((resolve, reject) => {
      master.once('error', reject)
      master.once('exit', (code, signal) =>
        code === 0 ? resolve() : reject(new Error(`the ${role} child ended with ${signal ?? `status ${code}`}`)),
      )
    })
    const report = lines.find((line) => line.role === role) as ReplicaReport | undefined
    check(report !== undefined, `the ${role} child printed no report`)
    return report
  } finally {
    const child = slave as ChildProcess | null
    if (child !== null && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    }
    if (master.exitCode === null && master.signalCode === null) master.kill('SIGKILL')
    removeDir(masterDir)
    removeDir(slaveDir)
  }
}
