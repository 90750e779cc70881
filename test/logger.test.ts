// The `logger` option: the function form, a pino-compatible logger with child loggers per
// service, console (no child), a logger that throws, and a logger of the wrong shape.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore, type LevelLogger, type OpenOptions } from '../lib/store/message-store.js'
import { createStoreLog } from '../lib/store/store-logger.js'
import { tempDir } from './helpers/tmp.js'

interface Line {
  level: string
  message: string
  bindings: Record<string, unknown>
}

/** A recording logger with pino's shape: level methods, and child() that merges bindings. */
function recordingLogger(lines: Line[], bindings: Record<string, unknown> = {}): LevelLogger {
  const at = (level: string) =>
    function (this: unknown, message: string) {
      // pino calls need their `this`: the store must call them as methods.
      expect(this).toBe(logger)
      lines.push({ level, message, bindings })
    }
  const logger: LevelLogger = {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (more) => recordingLogger(lines, { ...bindings, ...more }),
  }
  return logger
}

let dir: string
const small: OpenOptions = { mappedFileSizeCommitLog: 64 * 1024, mappedFileSizeConsumeQueue: 20 * 64, maxHashSlotNum: 64, maxIndexNum: 64 }

/** A store with one message, closed; then its checkpoint is deleted, so the next open repairs it. */
async function storeWithLostCheckpoint(): Promise<void> {
  const store = await MessageStore.open(dir, small)
  expect((await store.putMessage({ topic: 't', queueId: 0, body: 'x' })).status).toBe('PUT_OK')
  await store.close()
  fs.rmSync(join(dir, 'checkpoint'))
}

beforeEach(() => {
  dir = tempDir()
})

describe('logger option', () => {
  const stores: MessageStore[] = []
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close()
  })
  async function open(options: OpenOptions): Promise<MessageStore> {
    const store = await MessageStore.open(dir, { ...small, ...options })
    stores.push(store)
    return store
  }

  it('the function form still gets level and message', async () => {
    await storeWithLostCheckpoint()
    const lines: string[] = []
    await open({ logger: (level, message) => lines.push(`${level} ${message}`) })
    expect(lines).toContain('warn recreated the checkpoint: it was missing or not 4096 bytes')
  })

  it('a pino-compatible logger gets each service its child: repairs under recovery, retention under cleanup', async () => {
    await storeWithLostCheckpoint()
    const lines: Line[] = []
    const store = await open({ logger: recordingLogger(lines) })
    store.executeDeleteFilesManually()
    const repair = lines.find((l) => l.message.startsWith('recreated the checkpoint'))
    expect(repair).toEqual({
      level: 'warn',
      message: 'recreated the checkpoint: it was missing or not 4096 bytes',
      bindings: { component: 'recovery' },
    })
    const manual = lines.find((l) => l.message.includes('manual delete requested'))
    expect(manual?.level).toBe('info')
    expect(manual?.bindings).toEqual({ component: 'cleanup' })
  })

  it('a logger without child() (console) is used as it is', async () => {
    await storeWithLostCheckpoint()
    const lines: Line[] = []
    const at = (level: string) => (message: string) => lines.push({ level, message, bindings: {} })
    const logger: LevelLogger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
    await open({ logger })
    expect(lines.map((l) => `${l.level} ${l.message}`)).toContain('warn recreated the checkpoint: it was missing or not 4096 bytes')
  })

  it('a logger that throws loses its message, not the open or the put', async () => {
    await storeWithLostCheckpoint()
    let calls = 0
    const store = await open({
      logger: () => {
        calls++
        throw new Error('broken logger')
      },
    })
    expect(calls).toBeGreaterThan(0)
    expect(store.stats().repairs.map((r) => r.action)).toContain('recreated the checkpoint')
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'y' })).status).toBe('PUT_OK')
  })

  it('a logger of the wrong shape is a TypeError at open, and the directory stays free', async () => {
    await expect(MessageStore.open(dir, { ...small, logger: { info: () => {} } as never })).rejects.toThrow(TypeError)
    await expect(MessageStore.open(dir, { ...small, logger: 'debug' as never })).rejects.toThrow(/logger must be/)
    const store = await open({})
    expect(store.isClosed).toBe(false)
  })
})

describe('createStoreLog', () => {
  it('is silent without a logger, and its children too', () => {
    const log = createStoreLog(undefined)
    expect(() => log('error', 'nobody hears this')).not.toThrow()
    expect(log.child('flush')).toBe(log)
  })

  it('binds child loggers with { component } once per call to child', () => {
    const lines: Line[] = []
    const log = createStoreLog(recordingLogger(lines))
    log.child('flush')('error', 'flush: disk gone')
    log('info', 'root line')
    expect(lines).toEqual([
      { level: 'error', message: 'flush: disk gone', bindings: { component: 'flush' } },
      { level: 'info', message: 'root line', bindings: {} },
    ])
  })
})
