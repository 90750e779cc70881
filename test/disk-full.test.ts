// A full disk, on a real tiny tmpfs: every failure is a status or a logged error, never a signal,
// and nothing that was acknowledged is lost once space comes back.
import * as fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { tempDir } from './helpers/tmp.js'

const canMountTmpfs = process.platform === 'linux' && process.getuid?.() === 0

describe.runIf(canMountTmpfs)('disk full (tmpfs, Linux as root)', () => {
  let dir: string
  beforeEach(() => {
    dir = tempDir('mqstore-full-')
  })
  afterEach(() => {
    spawnSync('umount', [dir])
    fs.rmSync(dir, { recursive: true, force: true })
  })

  function mount(size: string, remount = false): void {
    const options = remount ? `remount,size=${size}` : `size=${size}`
    const result = spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir])
    expect(result.status).toBe(0)
  }

  const tick = () => new Promise((resolve) => setImmediate(resolve))

  it('a commit-log file that cannot be created answers CREATE_MAPEDFILE_FAILED; earlier messages stay readable', async () => {
    mount('256k')
    const store = await MessageStore.open(dir, {
      mappedFileSizeCommitLog: 64 * 1024,
      mappedFileSizeConsumeQueue: 20 * 100,
      messageIndexEnable: false,
    })
    const statuses: string[] = []
    for (let i = 0; i < 40 && !statuses.includes('CREATE_MAPEDFILE_FAILED'); i++) {
      statuses.push((await store.putMessage({ topic: 't', body: Buffer.alloc(10_000, i) })).status)
      await tick()
    }
    const ok = statuses.filter((s) => s === 'PUT_OK').length
    expect(ok).toBeGreaterThan(5)
    expect(statuses.slice(ok)).toEqual(['CREATE_MAPEDFILE_FAILED'])
    const got = store.getMessage('g', 't', 0, 0, 64)
    expect(got.messages.map((m) => m.body[0])).toEqual(Array.from({ length: ok }, (_, i) => i))
    await store.close()
  })

  it('a consume queue that cannot be created stops puts with SERVICE_NOT_AVAILABLE; reopening with space re-dispatches', async () => {
    mount('1m')
    const errors: string[] = []
    const options: OpenOptions = {
      mappedFileSizeCommitLog: 64 * 1024,
      mappedFileSizeConsumeQueue: 20 * 20_000,
      messageIndexEnable: false,
      logger: (level, message) => {
        if (level === 'error') errors.push(message)
      },
    }
    let store = await MessageStore.open(dir, options)
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'a' })).status).toBe('PUT_OK')
    await tick()
    expect((await store.putMessage({ topic: 't', queueId: 1, body: 'b' })).status).toBe('PUT_OK')
    await tick()
    // The record is appended (and acknowledged) before dispatch finds no room for queue 2's file.
    expect((await store.putMessage({ topic: 't', queueId: 2, body: 'c' })).status).toBe('PUT_OK')
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'd' })).status).toBe('SERVICE_NOT_AVAILABLE')
    expect(errors.some((e) => e.includes('dispatch stopped'))).toBe(true)
    expect(store.getMessage('g', 't', 0, 0, 8).messages.map((m) => m.body.toString())).toEqual(['a'])
    expect(store.getMaxOffsetInQueue('t', 2)).toBe(0)
    await store.close()
    // Dispatch never caught up, so the next open must recover abnormally.
    expect(fs.existsSync(`${dir}/abort`)).toBe(true)

    mount('8m', true)
    store = await MessageStore.open(dir, options)
    expect(store.stats().lastExitOK).toBe(false)
    expect(store.getMessage('g', 't', 2, 0, 8).messages.map((m) => m.body.toString())).toEqual(['c'])
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'd' })).status).toBe('PUT_OK')
    expect(store.getMessage('g', 't', 0, 0, 8).messages.map((m) => m.body.toString())).toEqual(['a', 'd'])
    await store.close()
  })
})

describe.runIf(!canMountTmpfs)('disk full (skipped: mounting a tmpfs needs Linux and root)', () => {
  it('is skipped on this platform because it cannot mount a tmpfs', () => {
    expect(canMountTmpfs).toBe(false)
  })
})
