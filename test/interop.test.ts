// Handing a store directory to a RocketMQ broker and back: the directory lock excludes a broker
// (whose lock is Java's FileChannel.tryLock, an fcntl lock), and a shutdown record written by
// mqstore never outlives another writer's changes.
import { createHash } from 'node:crypto'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { spawn, spawnSync } from 'node:child_process'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MQStoreError } from '../lib/errors.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { tempDir } from './helpers/tmp.js'

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-interop-')
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

// Python's fcntl.lockf takes the same classic POSIX record lock (F_SETLK, whole file) as Java's
// FileChannel.tryLock on Linux and macOS: it stands in for a broker.
const BROKER_LOCK = `
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError as e:
    print('busy', flush=True)
    sys.exit(0)
print('locked', flush=True)
if sys.argv[2] == 'hold':
    sys.stdin.read()
`
const python = spawnSync('python3', ['-c', 'import fcntl'], { encoding: 'utf8' }).status === 0

function brokerTry(lockPath: string): string {
  const result = spawnSync('python3', ['-c', BROKER_LOCK, lockPath, 'try'], { encoding: 'utf8' })
  expect(result.status, result.stderr).toBe(0)
  return result.stdout.trim()
}

const SMALL: OpenOptions = { mappedFileSizeCommitLog: 1 << 20, mappedFileSizeConsumeQueue: 20 * 1024, messageIndexEnable: false }

describe.runIf(python)('mutual exclusion with a broker (fcntl lock, python3 standing in for Java)', () => {
  it('a store cannot open while a broker holds the lock file', async () => {
    const broker = spawn('python3', ['-c', BROKER_LOCK, join(dir, 'lock'), 'hold'], { stdio: ['pipe', 'pipe', 'inherit'] })
    const exited = new Promise((resolve) => broker.on('exit', resolve))
    const said = await new Promise<string>((resolve) => broker.stdout.once('data', (chunk: Buffer) => resolve(chunk.toString().trim())))
    expect(said).toBe('locked')
    let error: unknown
    try {
      await MessageStore.open(dir, SMALL)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(MQStoreError)
    expect((error as MQStoreError).code).toBe('LOCKED')
    broker.stdin.end()
    await exited
    const store = await MessageStore.open(dir, SMALL)
    await store.close()
  })

  it('a broker cannot take the lock while a store is open, and can once it is closed', async () => {
    const store = await MessageStore.open(dir, SMALL)
    expect(brokerTry(join(dir, 'lock'))).toBe('busy')
    await store.close()
    expect(brokerTry(join(dir, 'lock'))).toBe('locked')
  })

  // A classic POSIX lock belongs to the process and goes away when any descriptor of the file is
  // closed; the open-file-description lock used on Linux does not.
  it.runIf(process.platform === 'linux')(
    "a second open of the same directory in the same process fails without dropping the first one's lock (Linux)",
    async () => {
      const store = await MessageStore.open(dir, SMALL)
      await expect(MessageStore.open(dir, SMALL)).rejects.toMatchObject({ code: 'LOCKED' })
      expect(brokerTry(join(dir, 'lock'))).toBe('busy')
      await store.close()
    },
  )
})
describe.runIf(!python)('mutual exclusion with a broker (skipped: python3 with fcntl is not installed)', () => {
  it('is skipped because python3, which stands in for the broker, is missing', () => {
    expect(python).toBe(false)
  })
})

describe('a shutdown record does not outlive another writer', () => {
  const options: OpenOptions = { ...SMALL, messageIndexEnable: true }
  const bodies = async (path: string): Promise<{ bodies: string[]; repairs: string[] }> => {
    const store = await MessageStore.open(path, options)
    try {
      const got = store.getMessage('g', 't', 0, 0, 32).messages.map((m) => m.body.toString())
      return { bodies: got, repairs: store.stats().repairs.map((r) => r.action) }
    } finally {
      await store.close()
    }
  }

  /**
   * A broker's run after mqstore's clean close: mqstore's close left `before`; the broker appended
   * records and dispatched them, flushed, and closed cleanly. Its files are those of `after` (the
   * same store written further), except that the broker never touches mqstore's shutdown record,
   * so the checkpoint keeps the record of `before` behind the broker's timestamps.
   */
  function brokerWrote(before: string, after: string, target: string, updateCheckpoint: boolean): void {
    fs.cpSync(before, target, { recursive: true })
    for (const part of ['commitlog', 'consumequeue', 'index']) {
      fs.rmSync(join(target, part), { recursive: true, force: true })
      fs.cpSync(join(after, part), join(target, part), { recursive: true })
    }
    if (updateCheckpoint) {
      const checkpoint = fs.readFileSync(join(target, 'checkpoint'))
      const later = fs.readFileSync(join(after, 'checkpoint'))
      later.copy(checkpoint, 0, 0, 24)
      // The broker's flush records its own last store time: never the one mqstore left.
      const physic = checkpoint.readBigInt64BE(0)
      const before0 = fs.readFileSync(join(before, 'checkpoint')).readBigInt64BE(0)
      if (physic <= before0) checkpoint.writeBigInt64BE(before0 + 1n, 0)
      fs.writeFileSync(join(target, 'checkpoint'), checkpoint)
    }
    fs.rmSync(join(target, 'abort'), { force: true })
  }

  async function writeBeforeAndAfter(): Promise<{ before: string; after: string }> {
    const live = join(dir, 'live')
    let store = await MessageStore.open(live, options)
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'mqstore-1', keys: ['k1'] })).status).toBe('PUT_OK')
    await store.close()
    const before = join(dir, 'before')
    fs.cpSync(live, before, { recursive: true })
    store = await MessageStore.open(live, options)
    for (const body of ['broker-2', 'broker-3']) {
      expect((await store.putMessage({ topic: 't', queueId: 0, body, keys: ['k2'] })).status).toBe('PUT_OK')
    }
    await store.close()
    return { before, after: live }
  }

  it('records a broker appended and flushed after a clean close are kept, not truncated', async () => {
    const { before, after } = await writeBeforeAndAfter()
    const target = join(dir, 'handed-back')
    brokerWrote(before, after, target, true)
    const seen = await bodies(target)
    expect(seen.bodies).toEqual(['mqstore-1', 'broker-2', 'broker-3'])
    expect(seen.repairs).toContain('ignored the shutdown record and scanned the commit log tail')
    // Puts continue after the broker's records.
    const store = await MessageStore.open(target, options)
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'mqstore-4' })).queueOffset).toBe(3)
    await store.close()
  })

  it('records found after the recorded end are kept even when the checkpoint looks untouched', async () => {
    const { before, after } = await writeBeforeAndAfter()
    const target = join(dir, 'handed-back')
    brokerWrote(before, after, target, false)
    expect((await bodies(target)).bodies).toEqual(['mqstore-1', 'broker-2', 'broker-3'])
  })

  it('an untouched store still opens from its shutdown record, without a scan', async () => {
    const { before } = await writeBeforeAndAfter()
    const seen = await bodies(before)
    expect(seen.bodies).toEqual(['mqstore-1'])
    expect(seen.repairs).toEqual([])
  })
})

describe('file sizes come from the store', () => {
  // Sizes no default or preset uses.
  const WRITTEN: OpenOptions = {
    mappedFileSizeCommitLog: 256 * 1024,
    mappedFileSizeConsumeQueue: 20 * 500,
    maxHashSlotNum: 1000,
    maxIndexNum: 4000,
  }

  /** Every file under the store with its size and a digest of its bytes. */
  function snapshot(root: string, part: string): Record<string, string> {
    const out: Record<string, string> = {}
    const walk = (path: string): void => {
      if (!fs.existsSync(path)) return
      for (const entry of fs.readdirSync(path, { withFileTypes: true })) {
        const full = join(path, entry.name)
        if (entry.isDirectory()) walk(full)
        else out[full.slice(root.length)] = createHash('sha256').update(fs.readFileSync(full)).digest('hex')
      }
    }
    walk(join(root, part))
    return out
  }

  async function writeStore(): Promise<void> {
    const store = await MessageStore.open(dir, WRITTEN)
    for (let i = 0; i < 40; i++) {
      expect((await store.putMessage({ topic: 't', queueId: i % 2, body: Buffer.alloc(10_000, i), keys: [`k${i}`] })).status).toBe('PUT_OK')
    }
    await store.close()
  }

  async function expectReadable(options: OpenOptions = {}): Promise<void> {
    const store = await MessageStore.open(dir, options)
    try {
      expect(store.config.mappedFileSizeCommitLog).toBe(WRITTEN.mappedFileSizeCommitLog)
      expect(store.config.mappedFileSizeConsumeQueue).toBe(WRITTEN.mappedFileSizeConsumeQueue)
      expect(store.config.maxHashSlotNum).toBe(WRITTEN.maxHashSlotNum)
      expect(store.config.maxIndexNum).toBe(WRITTEN.maxIndexNum)
      expect(store.getMessage('g', 't', 0, 0, 64).messages).toHaveLength(20)
      expect(store.queryMessage('t', 'k7', 8, 0, Date.now() + 1000).messages.map((m) => m.body[0])).toEqual([7])
      expect(store.stats().repairs).toEqual([])
    } finally {
      await store.close()
    }
  }

  it('a store written with other sizes opens without options, from the sizes it recorded', async () => {
    await writeStore()
    await expectReadable()
    await expectReadable({ preset: 'rocketmq' })
  })

  it('a store with no record (written by RocketMQ or an older mqstore) takes them from its files, then records them', async () => {
    await writeStore()
    fs.rmSync(join(dir, 'config', 'storeSizes.json'))
    const before = { ...snapshot(dir, 'consumequeue'), ...snapshot(dir, 'index') }
    // Index files alone do not tell slots from entries: open asks for them by name.
    await expect(MessageStore.open(dir)).rejects.toMatchObject({
      code: 'INVALID_OPTION',
      message: expect.stringMatching(/maxHashSlotNum.*maxIndexNum/),
    })
    expect({ ...snapshot(dir, 'consumequeue'), ...snapshot(dir, 'index') }).toEqual(before)
    await expectReadable({ maxHashSlotNum: 1000, maxIndexNum: 4000 })
    // Recorded now: the next open needs nothing.
    await expectReadable()
  })

  it("RocketMQ's 6,000,000-byte consume-queue files are read as such, with no option and no record", async () => {
    const written: OpenOptions = { mappedFileSizeCommitLog: 256 * 1024, mappedFileSizeConsumeQueue: 6_000_000, messageIndexEnable: false }
    let store = await MessageStore.open(dir, written)
    for (let i = 0; i < 5; i++) expect((await store.putMessage({ topic: 't', queueId: 0, body: `m${i}` })).status).toBe('PUT_OK')
    await store.close()
    fs.rmSync(join(dir, 'config', 'storeSizes.json'))
    const before = snapshot(dir, 'consumequeue')
    store = await MessageStore.open(dir, { messageIndexEnable: false })
    try {
      expect(store.config.mappedFileSizeConsumeQueue).toBe(6_000_000)
      expect(store.config.mappedFileSizeCommitLog).toBe(256 * 1024)
      expect(store.getMessage('g', 't', 0, 0, 8).messages.map((m) => m.body.toString())).toEqual(['m0', 'm1', 'm2', 'm3', 'm4'])
      expect(store.stats().repairs).toEqual([])
    } finally {
      await store.close()
    }
    expect(Object.keys(snapshot(dir, 'consumequeue'))).toEqual(Object.keys(before))
  })

  it('an option that contradicts the store is refused by name, and no consume-queue or index file is touched', async () => {
    await writeStore()
    const before = { ...snapshot(dir, 'commitlog'), ...snapshot(dir, 'consumequeue'), ...snapshot(dir, 'index') }
    for (const [name, value] of [
      ['mappedFileSizeCommitLog', 1 << 20],
      ['mappedFileSizeConsumeQueue', 20 * 300_000],
      ['maxHashSlotNum', 5_000_000],
      ['maxIndexNum', 20_000_000],
    ] as const) {
      await expect(MessageStore.open(dir, { [name]: value })).rejects.toMatchObject({
        code: 'INVALID_OPTION',
        message: expect.stringContaining(`'${name}'`),
      })
    }
    expect({ ...snapshot(dir, 'commitlog'), ...snapshot(dir, 'consumequeue'), ...snapshot(dir, 'index') }).toEqual(before)
    await expectReadable(WRITTEN)
  })
})
