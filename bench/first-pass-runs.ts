// Runs first-pass.ts in child processes of its own, one after the other (limits.ts).
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** First-pass processes per run of the limits. */
export const FIRST_PASS_RUNS = 3

/** Messages/s of each of `runs` first-pass processes of `count` messages (after warm-ups of `warmup`). */
export async function firstPassWorkRates(count: number, runs = FIRST_PASS_RUNS, warmup?: number): Promise<number[]> {
  const rates: number[] = []
  for (let k = 0; k < runs; k++) rates.push(await firstPassInChild(count, warmup))
  return rates
}

function firstPassInChild(count: number, warmup: number | undefined): Promise<number> {
  return new Promise((resolve, reject) => {
    let rate: number | null = null
    const args = warmup === undefined ? [String(count)] : [String(count), String(warmup)]
    // Without node flags, as the limits child itself.
    const child = fork(fileURLToPath(new URL('./first-pass.js', import.meta.url)), args, {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      execArgv: [],
    })
    child.on('message', (message) => {
      rate = (message as { rate: number }).rate
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (rate !== null && code === 0) resolve(rate)
      else reject(new Error(`first pass: child exited with ${signal ?? `status ${code}`}`))
    })
  })
}
