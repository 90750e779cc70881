// Corruption fuzz: random byte flips and truncations across every file type. The work runs in a
// child process so that a SIGSEGV or SIGBUS would be seen as such; every open must end in a
// recovered store or a typed error.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { distEntry, tempDir } from './helpers/tmp.js'

const OPTIONS: OpenOptions = {
  mappedFileSizeCommitLog: 16 * 1024,
  mappedFileSizeConsumeQueue: 20 * 40,
  maxHashSlotNum: 16,
  maxIndexNum: 64,
}
const ITERATIONS = Number(process.env.FUZZ_ITERATIONS ?? 400)

let root: string
beforeEach(() => {
  root = tempDir('mqstore-fuzz-')
})
afterEach(() => {
  fs.rmSync(root, { recursive: true, force: true })
})

describe('corruption fuzz', () => {
  it(`${ITERATIONS} damaged stores (1–8 flips or truncations each) open to a recovered store or a typed error, never a signal`, async () => {
    const pristine = join(root, 'pristine')
    const store = await MessageStore.open(pristine, OPTIONS)
    for (let i = 0; i < 200; i++) {
      await store.putMessage({
        topic: i % 2 ? 'a' : 'b',
        queueId: (i >> 1) % 2,
        body: Buffer.alloc(20 + (i % 9) * 30, i),
        tags: 't',
        keys: `k${i}`,
      })
    }
    store.commitOffset('g', 'a', 0, 5)
    await store.close()
    fs.writeFileSync(join(pristine, 'options.json'), JSON.stringify(OPTIONS))
    const seed = Math.floor(Math.random() * 2 ** 31)
    const work = join(root, 'work')
    fs.mkdirSync(work)
    const child = spawnSync(
      process.execPath,
      [new URL('./fixtures/fuzz-child.mjs', import.meta.url).pathname, distEntry, pristine, work, String(ITERATIONS), String(seed)],
      { encoding: 'utf8', timeout: 240_000 },
    )
    expect(child.signal, `seed ${seed}: ${child.stderr}`).toBeNull()
    expect(child.status, `seed ${seed}: ${child.stderr}`).toBe(0)
    const outcomes = JSON.parse(child.stdout.trim().split('\n').at(-1)!)
    expect(outcomes.flips + outcomes.truncations).toBeGreaterThanOrEqual(ITERATIONS)
    expect(outcomes.opened).toBeGreaterThan(0)
    expect(outcomes.opened + Object.values(outcomes.refused as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(ITERATIONS)
  }, 300_000)
})
