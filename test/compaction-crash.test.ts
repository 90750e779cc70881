// SIGKILL during compaction passes: a child puts keyed updates and compacts back to back; it is
// killed at a random moment, the store is reopened here, and the compacted queue must still hold
// the latest value of every key (folding the queue from its start gives the model), with offsets
// strictly increasing and no rewrite half-visible (no .cleaned / .swap left, no overlapping files).
import { spawn } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'

import { MessageStore } from '../lib/store/message-store.js'
import { distEntry, tempDir } from './helpers/tmp.js'

const KEYS = 11
const CYCLES = 6
const CHILD = fileURLToPath(new URL('./fixtures/compaction-crash-child.mjs', import.meta.url))

beforeAll(() => {
  if (!fs.existsSync(fileURLToPath(distEntry))) throw new Error('the child runs the compiled package: run `npm run build:ts` first')
})

/** Runs the child until it has started `passes` passes and acknowledged at least `minAcks` puts, then kills it. */
function runAndKill(dir: string, passes: number, minAcks: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, distEntry, dir, String(KEYS)], { stdio: ['ignore', 'pipe', 'pipe'] })
    let acks = 0
    let started = 0
    let killed = false
    let stderr = ''
    let buffered = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    child.stdout.on('data', (d: Buffer) => {
      buffered += d.toString()
      const lines = buffered.split('\n')
      buffered = lines.pop() ?? ''
      for (const line of lines) {
        if (line.startsWith('ack ')) acks = Number(line.slice(4))
        else if (line === 'pass') started++
      }
      if (!killed && started >= passes && acks >= minAcks) {
        killed = true
        child.kill('SIGKILL')
      }
    })
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL') resolve(acks)
      else reject(new Error(`child exited with ${code}: ${stderr}`))
    })
  })
}

describe('SIGKILL during compaction passes', () => {
  it(`never loses the latest value of a key nor leaves old and new files both visible (${CYCLES} kills)`, async () => {
    const base = tempDir('mqstore-compaction-crash-')
    const dir = join(base, 'store')
    try {
      for (let cycle = 0; cycle < CYCLES; cycle++) {
        const acks = await runAndKill(dir, 2 + Math.floor(Math.random() * 4), 50 + Math.floor(Math.random() * 2000))
        const qdir = join(dir, 'compaction', 'kv', '0')
        const store = await MessageStore.open(dir, {
          mappedFileSizeCommitLog: 256 * 1024,
          mappedFileSizeConsumeQueue: 20 * 1000,
          maxHashSlotNum: 64,
          maxIndexNum: 256,
          compaction: { enabled: false },
        })
        try {
          expect(fs.readdirSync(qdir).filter((n) => n.endsWith('.cleaned') || n.endsWith('.swap') || n.endsWith('.deleted'))).toEqual([])
          const max = store.getMaxOffsetInQueue('kv', 0)
          expect(max, `cycle ${cycle}`).toBeGreaterThanOrEqual(acks)
          const expected = new Map<string, string>()
          for (let i = 0; i < max; i++) expected.set(`k${i % KEYS}`, `v${i}-${'p'.repeat(i % 90)}`)
          const folded = new Map<string, string>()
          let offset = 0
          let last = -1
          for (;;) {
            const r = store.getMessage('g', 'kv', 0, offset, 64)
            if (r.status !== 'FOUND') break
            for (const m of r.messages) {
              expect(m.queueOffset).toBeGreaterThan(last)
              last = m.queueOffset
              expect(m.body.toString()).toBe(`v${m.queueOffset}-${'p'.repeat(m.queueOffset % 90)}`)
              folded.set(m.keys.join(' '), m.body.toString())
            }
            offset = r.nextBeginOffset
          }
          expect(folded, `cycle ${cycle}`).toEqual(expected)
        } finally {
          await store.close()
        }
      }
    } finally {
      fs.rmSync(base, { recursive: true, force: true })
    }
  }, 180_000)
})
