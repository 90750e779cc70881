// The parent side of the delivery crash tests: runs test/fixtures/delivery-crash-child.mjs until
// it has delivered some messages, SIGKILLs it, and returns what it acknowledged; and counts the
// deliveries found afterwards.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { expect } from 'vitest'

import type { MessageExt } from '../../lib/store/message-store.js'
import { distEntry } from './tmp.js'

const CHILD = fileURLToPath(new URL('../fixtures/delivery-crash-child.mjs', import.meta.url))

/** Runs the child until it has delivered `minDelivered` messages, then kills it; the acknowledged UNIQ_KEYs. */
export function runAndKill(mode: 'delay' | 'timer', dir: string, run: number, minDelivered: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, distEntry, dir, String(run), mode], { stdio: ['ignore', 'pipe', 'pipe'] })
    const acks: string[] = []
    let killed = false
    let stderr = ''
    let buffered = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    child.stdout.on('data', (d: Buffer) => {
      buffered += d.toString()
      const lines = buffered.split('\n')
      buffered = lines.pop() ?? ''
      for (const line of lines) {
        if (line.startsWith('ack ')) acks.push(line.slice(4))
        else if (line.startsWith('delivered ') && !killed && Number(line.slice(10)) >= minDelivered) {
          killed = true
          child.kill('SIGKILL')
        }
      }
    })
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL') resolve(acks)
      else reject(new Error(`child exited with ${code}: ${stderr}`))
    })
  })
}

/**
 * How many times each UNIQ_KEY was delivered among `messages`; every body must be the child's
 * (`body of <UNIQ_KEY>`) and `cleared`, the property the delivery drops, gone.
 */
export function deliveredCounts(messages: readonly MessageExt[], cleared: string): Map<string, number> {
  const count = new Map<string, number>()
  for (const m of messages) {
    const uniq = m.properties.UNIQ_KEY
    expect(m.body.toString()).toBe(`body of ${uniq}`)
    expect(m.properties[cleared]).toBeUndefined()
    count.set(uniq, (count.get(uniq) ?? 0) + 1)
  }
  return count
}
