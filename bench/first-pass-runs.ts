// Runs first-pass.ts in child processes of its own, one after the other (limits.ts).
import { fileURLToPath } from 'node:url'

import { resultFromChild } from './child-result.js'
import type { FirstPassMemory } from './first-pass.js'

/** First-pass processes per run of the limits. */
export const FIRST_PASS_RUNS = 3

/**
 * Messages/s of each of `runs` first-pass processes of `count` messages (after warm-ups of
 * `warmup`), their regions pre-faulted or faulted in ahead of the writer (`memory`).
 */
export async function firstPassWorkRates(
  count: number,
  runs = FIRST_PASS_RUNS,
  warmup?: number,
  memory: FirstPassMemory = 'prefaulted',
): Promise<number[]> {
  const rates: number[] = []
  for (let k = 0; k < runs; k++) rates.push(await firstPassInChild(count, warmup, memory))
  return rates
}

function firstPassInChild(count: number, warmup: number | undefined, memory: FirstPassMemory): Promise<number> {
  const args = [String(count), String(warmup ?? -1), memory]
  // Without node flags, as the limits child itself.
  const script = fileURLToPath(new URL('./first-pass.js', import.meta.url))
  return resultFromChild<{ rate: number }>(script, args, (why) => new Error(`first pass: ${why}`)).then((message) => message.rate)
}
