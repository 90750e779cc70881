// Handing a store directory to a RocketMQ broker and back: the directory lock excludes a broker
// (whose lock is Java's FileChannel.tryLock, an fcntl lock), and a shutdown record written by
// mqstore never outlives another writer's changes.
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
    'a second open of the same directory in the same process fails without dropping the first one\'s lock (Linux)',
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
