// Runs first-pass.ts in child processes of its own, one after the other (limits.ts).
import { fileURLToPath } from 'node:url'

import { resultFromChild } from './child-result.js'

/** First-pass processes per run of the limits. */
export const FIRST_PASS_RUNS = 3

/** Messages/s of each of `runs` first-pass processes of `count` messages (after warm-ups of `warmup`). */
export async function firstPassWorkRates(count: number, runs = FIRST_PASS_RUNS, warmup?: number): Promise<number[]> {
  const rates: number[] = []
  for (let k = 0; k < runs; k++) rates.push(await firstPassInChild(count, warmup))
  return rates
}

function firstPassInChild(count: number, warmup: number | undefined): Promise<number> {
  const args = warmup === undefined ? [String(count)] : [String(count), String(warmup)]
  // Without node flags, as the limits child itself.
  const script = fileURLToPath(new URL('./first-pass.js', import.meta.url))
  return resultFromChild<{ rate: number }>(script, args, (why) => new Error(`first pass: ${why}`)).then((message) => message.rate)
}
