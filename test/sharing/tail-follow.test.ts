// `mqstore tail --follow` through a read-only opener, run in this process beside a writer: it
// starts where --from says in each queue, follows queues the topic gains, and stops at --limit or
// when interrupted.
import { afterEach, describe, expect, it } from 'vitest'

import { runCommand } from '../../lib/cli/frame.js'
import { tailCommand } from '../../lib/cli/tail.js'
import { MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { waitFor } from '../helpers/wait.js'

const stores: MessageStore[] = []
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
})

async function writer(dir: string): Promise<MessageStore> {
  const store = await MessageStore.open(dir, { mappedFileSizeCommitLog: 64 * 1024 })
  stores.push(store)
  return store
}

/** Runs `mqstore tail --follow --json` with `args`; the bodies it printed, and its exit code. */
function tail(dir: string, args: string[], signal?: AbortSignal): { bodies: string[]; done: Promise<number> } {
  const bodies: string[] = []
  let text = ''
  const out = {
    write(chunk: string) {
      text += chunk
      for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n')) {
        bodies.push(JSON.parse(text.slice(0, at)).body)
        text = text.slice(at + 1)
      }
    },
  }
  const err = { write: (chunk: string) => void process.stderr.write(chunk) }
  return { bodies, done: runCommand(tailCommand, [dir, '--follow', '--json', ...args], { out, err, signal }) }
}

describe('mqstore tail --follow', () => {
  it('starts at an offset or a time in each queue and stops at --limit', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    for (let i = 0; i < 6; i++) await w.putMessage({ topic: 't', queueId: 0, body: `m${i}` })
    const third = w.getMessageStoreTimeStamp('t', 0, 3)
    const byOffset = tail(dir, ['--topic', 't', '--queue', '0', '--from', '4', '--limit', '3'])
    await waitFor(() => byOffset.bodies.length === 2, 'two bodies from the offset')
    await w.putMessage({ topic: 't', queueId: 0, body: 'm6' })
    expect(await byOffset.done).toBe(0)
    expect(byOffset.bodies).toEqual(['m4', 'm5', 'm6'])
    const byTime = tail(dir, ['--topic', 't', '--from', new Date(third).toISOString(), '--limit', '1'])
    expect(await byTime.done).toBe(0)
    expect(byTime.bodies).toHaveLength(1)
    const latest = tail(dir, ['--topic', 't', '--from', 'latest', '--limit', '1'])
    await new Promise((resolve) => setTimeout(resolve, 20))
    await w.putMessage({ topic: 't', queueId: 0, body: 'm7' })
    expect(await latest.done).toBe(0)
    expect(latest.bodies).toEqual(['m7'])
  })

  it('follows a topic that does not exist yet, and the queues it gains, until interrupted', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    const stop = new AbortController()
    const run = tail(dir, ['--topic', 'later'], stop.signal)
    await new Promise((resolve) => setTimeout(resolve, 20))
    await w.putMessage({ topic: 'later', queueId: 0, body: 'q0' })
    await waitFor(() => run.bodies.length === 1, 'the first body')
    w.createTopic('later', { queues: 2 })
    await w.putMessage({ topic: 'later', queueId: 1, body: 'q1' })
    await waitFor(() => run.bodies.length === 2, 'the second body')
    stop.abort()
    expect(await run.done).toBe(0)
    expect(run.bodies).toEqual(['q0', 'q1'])
  })
})
