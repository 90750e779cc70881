// The `mqstore` command, run as a real child process on real store directories.
import { spawn, spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { Progress } from '../lib/cli/frame.js'
import { COMMANDS } from '../lib/cli/main.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { repoRoot, tempDir } from './helpers/tmp.js'

const CLI = join(repoRoot, 'dist/lib/cli/main.js')
// Index dimensions that are neither a preset nor 4 entries per slot: `get --key` must scan.
const SMALL: OpenOptions = { mappedFileSizeCommitLog: 64 * 1024, mappedFileSizeConsumeQueue: 400, maxHashSlotNum: 64, maxIndexNum: 256 }
const BINARY = Buffer.from([0xff, 0xfe, 0x00, 0x80])

type CliResult = { code: number | null; stdout: string; stderr: string }

function runIn(cwd: string | undefined, args: string[]): CliResult {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 60_000, cwd })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

function cli(...args: string[]): CliResult {
  return runIn(undefined, args)
}
/** The command run with `cwd` as its working directory. */
cli.at = (cwd: string, ...args: string[]): CliResult => runIn(cwd, args)

function json<T = any>(...args: string[]): T {
  const r = cli(...args, '--json')
  expect(r.stderr).toBe('')
  expect(r.code).toBe(0)
  return JSON.parse(r.stdout) as T
}

function ndjson(...args: string[]): any[] {
  const r = cli(...args, '--json')
  expect(r.code).toBe(0)
  return r.stdout.trim() === ''
    ? []
    : r.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line))
}

/** Waits until the clock has moved past `t`, so that the next put gets a later store time. */
async function after(t: number): Promise<void> {
  while (Date.now() <= t) await new Promise((resolve) => setImmediate(resolve))
}

let dir: string
let offsets: number[] = []
let secondBatchTime = 0

beforeAll(async () => {
  dir = tempDir('mqstore-cli-')
  const store = await MessageStore.open(dir, SMALL)
  // 120 orders over two queues (several 20-unit queue files), 30 payments, one binary body.
  for (let i = 0; i < 150; i++) {
    if (i === 100) {
      await after(Date.now())
      secondBatchTime = Date.now()
    }
    const [topic, queueId] = i < 120 ? ['orders', i % 2] : ['payments', 0]
    const r = await store.putMessage({ topic, queueId, body: `message ${i}`, tags: `t${i % 3}`, keys: [`key-${i}`] })
    expect(r.status).toBe('PUT_OK')
    offsets.push(r.wroteOffset)
  }
  const binary = await store.putMessage({ topic: 'payments', queueId: 0, body: BINARY, keys: ['binary'] })
  offsets.push(binary.wroteOffset)
  store.commitOffset('billing', 'orders', 0, 20)
  store.commitOffset('billing', 'orders', 1, 60)
  await store.close()
})

afterAll(() => {
  offsets = []
})

describe('mqstore inspect', () => {
  it('lists queues with their offset ranges, groups with their lag, files and shutdown state', () => {
    const r = json('inspect', dir)
    expect(r.lastShutdownClean).toBe(true)
    expect(r.openElsewhere).toBe(false)
    expect(r.queues).toEqual([
      { topic: 'orders', queueId: 0, files: 3, minOffset: 0, maxOffset: 60, messages: 60 },
      { topic: 'orders', queueId: 1, files: 3, minOffset: 0, maxOffset: 60, messages: 60 },
      { topic: 'payments', queueId: 0, files: 2, minOffset: 0, maxOffset: 31, messages: 31 },
    ])
    expect(r.topics).toEqual([
      { topic: 'orders', queues: 2, messages: 120 },
      { topic: 'payments', queues: 1, messages: 31 },
    ])
    expect(r.groups).toEqual([
      { group: 'billing', topic: 'orders', queueId: 0, committedOffset: 20, maxOffset: 60, lag: 40 },
      { group: 'billing', topic: 'orders', queueId: 1, committedOffset: 60, maxOffset: 60, lag: 0 },
    ])
    expect(r.commitLog.minOffset).toBe(0)
    expect(r.commitLog.files.length).toBeGreaterThan(0)
    expect(r.index.files.reduce((s: number, f: { entries: number }) => s + f.entries, 0)).toBe(151)
    expect(r.disk.totalBytes).toBeGreaterThan(r.disk.commitLogBytes)
    const human = cli('inspect', dir)
    expect(human.code).toBe(0)
    expect(human.stdout).toContain('last shutdown clean')
    expect(human.stdout).toMatch(/billing\s+orders\/0\s+20\s+60\s+40/)
  })

  it('works on a store another process has open, and says it is open', async () => {
    const store = await MessageStore.open(dir, SMALL)
    try {
      await store.putMessage({ topic: 'orders', queueId: 0, body: 'while open' })
      const r = json('inspect', dir)
      expect(r.openElsewhere).toBe(true)
      expect(r.lastShutdownClean).toBe(false)
      expect(r.queues[0].maxOffset).toBe(61)
      // A command that needs the lock says so in one line, with its own exit code.
      const locked = cli('stats', dir, '--open')
      expect(locked.code).toBe(3)
      expect(locked.stderr).toMatch(/^mqstore stats: .*open in another process.*\n$/)
      expect(locked.stderr).not.toContain('    at ')
    } finally {
      await store.close()
    }
  })
})

describe('mqstore tail', () => {
  it('prints a topic from earliest, from an offset, from a time, and up to a limit', () => {
    const all = ndjson('tail', dir, '--topic', 'orders', '--queue', '1')
    expect(all.map((m) => m.queueOffset)).toEqual([...Array(60).keys()])
    expect(all[0].body).toBe('message 1')
    expect(ndjson('tail', dir, '--topic', 'orders').length).toBeGreaterThanOrEqual(120)
    expect(ndjson('tail', dir, '--topic', 'orders', '--queue', '0', '--from', '55').map((m) => m.body)).toEqual(
      [110, 112, 114, 116, 118].map((i) => `message ${i}`).concat(['while open']),
    )
    // Messages 100.. were put after secondBatchTime; in orders/0 that is queue offset 50 on.
    const since = ndjson('tail', dir, '--topic', 'orders', '--queue', '0', '--from', new Date(secondBatchTime).toISOString())
    expect(since[0].body).toBe('message 100')
    expect(ndjson('tail', dir, '--topic', 'payments', '--limit', '3').map((m) => m.body)).toEqual([
      'message 120',
      'message 121',
      'message 122',
    ])
    expect(ndjson('tail', dir, '--topic', 'orders', '--from', 'latest')).toEqual([])
    const missing = cli('tail', dir, '--topic', 'nothing')
    expect(missing.code).toBe(4)
    expect(missing.stderr).toBe('mqstore tail: no topic nothing in this store (--follow waits for it)\n')
    expect(cli('tail', dir, '--topic', 'orders', '--queue', '7').code).toBe(4)
  })

  it('prints a body that is not UTF-8 as base64 or hex', () => {
    const [b64] = ndjson('tail', dir, '--topic', 'payments', '--from', '30')
    expect(b64).toMatchObject({ body: BINARY.toString('base64'), bodyEncoding: 'base64', keys: ['binary'] })
    const [hex] = ndjson('tail', dir, '--topic', 'payments', '--from', '30', '--binary', 'hex')
    expect(hex).toMatchObject({ body: 'fffe0080', bodyEncoding: 'hex' })
    expect(cli('tail', dir, '--topic', 'payments', '--from', '30').stdout).toContain('base64:')
  })

  it('--follow prints messages another process puts, and exits 0 on SIGTERM', async () => {
    const store = await MessageStore.open(dir, SMALL)
    const child = spawn(process.execPath, [CLI, 'tail', dir, '--topic', 'followed', '--follow', '--json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    try {
      let out = ''
      const seen = new Promise<void>((resolve) => {
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString()
          if (/"follow 2 *"/.test(out)) resolve()
        })
      })
      // The topic does not exist when tail starts; its queue appears with the first put. 30 KB
      // bodies in 64 KiB commit-log files: tail must find the files the writer adds meanwhile.
      const pad = ' '.repeat(30_000)
      for (let i = 0; i < 3; i++) await store.putMessage({ topic: 'followed', queueId: 0, body: `follow ${i}${pad}` })
      await seen
      const exit = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
      child.kill('SIGTERM')
      expect(await exit).toBe(0)
      expect(
        out
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line).body.trim()),
      ).toEqual(['follow 0', 'follow 1', 'follow 2'])
    } finally {
      child.kill('SIGKILL')
      await store.close()
    }
  })
})

describe('mqstore get', () => {
  it('gets a message by commit-log offset', () => {
    const [m] = json('get', dir, '--offset', String(offsets[7]))
    expect(m).toMatchObject({ topic: 'orders', queueId: 1, body: 'message 7', commitLogOffset: offsets[7], keys: ['key-7'] })
    const missing = cli('get', dir, '--offset', String(offsets[7] + 1))
    expect(missing.code).toBe(4)
    expect(missing.stderr).toBe(`mqstore get: no message starts at commit-log offset ${offsets[7] + 1}\n`)
  })

  it('gets messages by key, through the index or by reading the queues', () => {
    // These index dimensions cannot be told from the file size: the topic's queues are read.
    expect(json('get', dir, '--topic', 'orders', '--key', 'key-42').map((m: any) => m.body)).toEqual(['message 42'])
    const indexed = json('get', dir, '--topic', 'orders', '--key', 'key-42', '--max-hash-slot-num', '64', '--max-index-num', '256')
    expect(indexed.map((m: any) => m.body)).toEqual(['message 42'])
    expect(cli('get', dir, '--topic', 'payments', '--key', 'key-42').code).toBe(4)
    expect(cli('get', dir, '--key', 'key-42').code).toBe(2)
  })

  it('uses the index of a store sized with four entries per slot', async () => {
    const indexed = tempDir('mqstore-cli-index-')
    const store = await MessageStore.open(indexed, { ...SMALL, maxHashSlotNum: 50, maxIndexNum: 200 })
    for (let i = 0; i < 30; i++) await store.putMessage({ topic: 'a', body: `m${i}`, keys: [`k${i % 10}`] })
    await store.close()
    expect(json('get', indexed, '--topic', 'a', '--key', 'k3').map((m: any) => m.body)).toEqual(['m3', 'm13', 'm23'])
  })
})

describe('mqstore stats', () => {
  it('computes figures from the files, or opens the store for MessageStore.stats()', () => {
    const s = json('stats', dir)
    expect(s.messages).toBe(120 + 31 + 1 + 3) // + 'while open' and the three followed
    expect(s.consumeQueueCount).toBe(4)
    expect(s.maxConsumerLag).toBe(41)
    expect(s.earliestMessageTime).toBeGreaterThan(0)
    expect(s.latestMessageTime).toBeGreaterThanOrEqual(s.earliestMessageTime)
    // The files' figures agree with the open store's: the commit log's end is found the same way.
    const live = json('stats', dir, '--open')
    expect(live).toMatchObject({ lastExitOK: true, consumeQueueCount: 4, commitLogMaxOffset: s.commitLogMaxOffset, repairs: [] })
  })
})

describe('the command frame', () => {
  it('has --help and -h for the command and for every subcommand, which touch no directory', () => {
    const top = cli('--help')
    expect(top.code).toBe(0)
    const names = COMMANDS.map((c) => c.name)
    expect(names).toEqual(expect.arrayContaining(['inspect', 'tail', 'get', 'stats', 'verify', 'clean', 'compact', 'bench', 'demo']))
    // Run where a command that took '-h' for a store directory would leave one behind.
    const cwd = tempDir('mqstore-cli-help-')
    for (const name of names) {
      expect(top.stdout).toContain(`  ${name}`)
      for (const args of [['--help'], ['-h'], [join(cwd, 'store'), '--help']]) {
        const help = cli.at(cwd, name, ...args)
        expect(help.code, `${name} ${args.join(' ')}: ${help.stderr}`).toBe(0)
        expect(help.stdout, name).toMatch(new RegExp(`^usage: mqstore ${name}`))
      }
    }
    expect(fs.readdirSync(cwd)).toEqual([])
  }, 180_000)

  it('prints one line per error, a stack only with --debug, JSON with --json, and exit codes', () => {
    const missing = cli('inspect', join(dir, 'nope'))
    expect(missing.code).toBe(2)
    expect(missing.stderr).toBe(`mqstore inspect: ${join(dir, 'nope')}: no such directory\n`)
    expect(cli('inspect', join(dir, 'nope'), '--debug').stderr).toContain('    at ')
    const asJson = cli('inspect', join(dir, 'nope'), '--json')
    expect(JSON.parse(asJson.stdout)).toEqual({ error: { message: `${join(dir, 'nope')}: no such directory`, exitCode: 2 } })
    expect(cli('tail', dir).code).toBe(2) // --topic missing
    expect(cli('tail', dir, '--topic', 'a', '--from', 'yesterday').code).toBe(2)
    expect(cli('inspect', dir, '--bogus').code).toBe(2)
    const unknown = cli('frobnicate')
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain("unknown command 'frobnicate'")
  })

  it('runs verify and demo with output that parses', () => {
    expect(json('verify', dir, '--max-hash-slot-num', '64', '--max-index-num', '256').ok).toBe(true)
    expect(cli('verify', join(dir, 'nope'), '--debug').code).toBe(2) // --debug is accepted by every command
    const demoDir = join(tempDir('mqstore-cli-demo-'), 'data')
    const demo = json('demo', demoDir)
    expect(demo).toMatchObject({ produced: 6000, consumed: 1500, keysFound: 3, reusedStore: false })
  })

  // `script` (util-linux) runs the command on a pseudo-terminal, as a user at a terminal would.
  const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0
  it.skipIf(!hasScript)('shows recovery progress on a terminal and nothing when piped (needs util-linux script for a pty)', async () => {
    // Copies of a store taken while it is open look crashed: opening them recovers with progress.
    const base = tempDir('mqstore-cli-progress-')
    const store = await MessageStore.open(join(base, 'live'), SMALL)
    for (let i = 0; i < 50; i++) await store.putMessage({ topic: 'p', body: `message ${i}` })
    fs.cpSync(join(base, 'live'), join(base, 'tty'), { recursive: true })
    fs.cpSync(join(base, 'live'), join(base, 'piped'), { recursive: true })
    await store.close()
    const command = [process.execPath, CLI, 'stats', join(base, 'tty'), '--open', '--json'].map((a) => `'${a}'`).join(' ')
    const tty = spawnSync('script', ['-qec', command, '/dev/null'], { encoding: 'utf8', timeout: 60_000 })
    expect(tty.status).toBe(0)
    expect(tty.stdout).toMatch(/\rrecovering \[#+\] 100%\r\x1b\[K/)
    const piped = spawnSync(process.execPath, [CLI, 'stats', join(base, 'piped'), '--open', '--json'], {
      encoding: 'utf8',
      timeout: 60_000,
    })
    expect(piped.status).toBe(0)
    expect(piped.stderr).toBe('')
    expect(JSON.parse(piped.stdout).lastExitOK).toBe(false)
  })

  it('draws a progress bar on a TTY only', () => {
    const writes: string[] = []
    const tty = new Progress({ write: (t: string) => writes.push(t), isTTY: true, columns: 60 }, 'working', true)
    tty.update(1, 4)
    tty.update(1, 4) // same percentage: no redraw
    tty.update(4, 4)
    tty.done()
    expect(writes).toHaveLength(3)
    expect(writes[0]).toMatch(/^\rworking \[#+-+\] {2}25%$/)
    expect(writes[1]).toContain('100%')
    expect(writes[2]).toBe('\r\x1b[K')
    const piped: string[] = []
    const quiet = new Progress({ write: (t: string) => piped.push(t) }, 'working', false)
    quiet.update(1, 2)
    quiet.done()
    expect(piped).toEqual([])
  })
})
