// The timer across a process crash and a power cut, on the power-loss model's disk images, with
// timers both due (delivered, their copies in the page cache only) and pending (days ahead):
// - a process crash keeps the page cache: the progress note (config/timerProgress.json) says what
//   was delivered, so the reopened store repeats none of it, and the pending ones stay pending;
// - a note whose deliveries the logs lost (as a power cut leaves one the kernel wrote back) is
//   not trusted: config/timercheck decides and the due ones go again (same UNIQ_KEY);
// - a power cut loses the unsynced copies and the note: nothing is lost, the due ones go again;
// - a seeded run of steps (timed puts, clock moves with deliveries, a cancel now and then), each
//   ending in a power cut or a process crash at a random storage event and going on from the
//   image: every timer whose put was durable at a cut is still pending or delivered after it,
//   nothing is delivered that was not put (byte for byte), and at the end each durable timer not
//   cancelled is delivered.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/store/message-store.js'
import { PowerLossDisk, prng, type PowerCut } from '../helpers/power-loss.js'
import { tempDir } from '../helpers/tmp.js'
import { FakeClock, readAll, SMALL, timerOf, waitFor } from './helpers.js'

/** Nothing is flushed on its own: only a close syncs the commit log. */
const QUIET = {
  ...SMALL,
  timerPrecisionMs: 100,
  flushIntervalCommitLog: 3_600_000,
  flushCommitLogThoroughInterval: 3_600_000,
  flushCommitLogLeastPages: 10_000,
  flushIntervalConsumeQueue: 3_600_000,
  flushConsumeQueueThoroughInterval: 3_600_000,
  flushConsumeQueueLeastPages: 10_000,
}
const DAY = 86_400_000

let disk: PowerLossDisk | null = null
afterEach(() => {
  disk?.disarm()
  disk = null
})

function keys(store: MessageStore): string[] {
  return readAll(store, 'later', 0).map((m) => m.properties.UNIQ_KEY)
}

/**
 * Six timers due in a second and four due in two days, parked durably (a clean close); then,
 * on the armed disk, the six are delivered and the image is taken by `take`.
 */
async function deliverThenImage(
  mode: 'power-loss' | 'lose-unsynced',
  take: (disk: PowerLossDisk) => { dir: string },
  seed = 5,
  cutAtEvent: number | null = null,
): Promise<{ image: string; fake: FakeClock }> {
  const root = tempDir('mqstore-timer-cut-')
  const dir = join(root, 'store')
  fs.mkdirSync(dir)
  const fake = new FakeClock()
  let store = await MessageStore.open(dir, { ...QUIET, clock: fake.clock })
  for (let i = 0; i < 10; i++) {
    const delayMs = i < 6 ? 1000 : 2 * DAY
    const r = await store.putMessage({ topic: 'later', body: `m${i}`, properties: { UNIQ_KEY: `U${i}` }, delayMs } as never)
    expect(r.status).toBe('PUT_OK')
  }
  await timerOf(store).deliverDue()
  await waitFor(() => store.stats().timer.pending === 10, 'the ten enqueued')
  await store.close()
  disk = new PowerLossDisk({ root: dir, seed, cutAtEvent, imageRoot: join(root, 'images'), mode }).arm()
  store = await MessageStore.open(dir, { ...QUIET, clock: fake.clock })
  fake.at += 60_000
  await timerOf(store).deliverDue()
  expect(keys(store)).toEqual(['U0', 'U1', 'U2', 'U3', 'U4', 'U5'])
  expect(store.stats().timer.pending).toBe(4)
  // The periodic save runs meanwhile; the copies are not flushed, so it cannot cover them.
  await new Promise((resolve) => setTimeout(resolve, 1500))
  expect(store.stats().commitLogFlushedOffset).toBeLessThan(store.stats().commitLogMaxOffset)
  const image = take(disk)
  await store.close()
  disk.disarm()
  disk = null
  return { image: image.dir, fake }
}

/** Opens the image, delivers what is due now, then moves three days on: every key, and how often. */
async function deliverAll(image: string, fake: FakeClock, lines: string[], openedBefore = true): Promise<Map<string, number>> {
  const store = await MessageStore.open(image, {
    ...QUIET,
    clock: fake.clock,
    logger: (level, message) => lines.push(`${level} ${message}`),
  })
  try {
    // A cut during the open, before its abort file was made, leaves what looks like a clean close.
    if (openedBefore) expect(store.stats().lastExitOK).toBe(false)
    await timerOf(store).deliverDue()
    expect(store.stats().timer.pending).toBe(4)
    fake.at += 3 * DAY
    await timerOf(store).deliverDue()
    await waitFor(() => store.stats().timer.pending === 0, 'the pending four delivered')
    const counts = new Map<string, number>()
    for (const key of keys(store)) counts.set(key, (counts.get(key) ?? 0) + 1)
    return counts
  } finally {
    await store.close()
  }
}

const ALL = ['U0', 'U1', 'U2', 'U3', 'U4', 'U5', 'U6', 'U7', 'U8', 'U9']

describe.skipIf(process.platform !== 'linux')('timers across a crash and a power cut (Linux only: the power-loss model)', () => {
  it('a process crash repeats no delivered timer: the progress note resumes after the last batch', async () => {
    const { image, fake } = await deliverThenImage('power-loss', (d) => d.crashNow())
    const note = JSON.parse(fs.readFileSync(join(image, 'config', 'timerProgress.json'), 'utf8'))
    expect(note).toMatchObject({ done: 6, readTime: expect.any(Number), logEnd: expect.any(Number), timerLogEnd: expect.any(Number) })
    const counts = await deliverAll(image, fake, [])
    expect([...counts.keys()].sort()).toEqual(ALL)
    expect([...counts.values()].every((n) => n === 1)).toBe(true)
  })

  it('a note past the recovered commit log is not trusted: the due timers go again, none lost', async () => {
    const { image, fake } = await deliverThenImage('power-loss', (d) => d.crashNow())
    const path = join(image, 'config', 'timerProgress.json')
    const note = JSON.parse(fs.readFileSync(path, 'utf8'))
    fs.writeFileSync(path, JSON.stringify({ ...note, logEnd: note.logEnd + 1_000_000 }))
    const lines: string[] = []
    const counts = await deliverAll(image, fake, lines)
    expect([...counts.keys()].sort()).toEqual(ALL)
    for (const key of ALL.slice(0, 6)) expect(counts.get(key)).toBe(2)
    for (const key of ALL.slice(6)) expect(counts.get(key)).toBe(1)
    expect(lines).toContainEqual(expect.stringMatching(/timerProgress.json counts deliveries the logs lost/))
  })

  it('a torn note is ignored the same way', async () => {
    const { image, fake } = await deliverThenImage('power-loss', (d) => d.crashNow())
    fs.writeFileSync(join(image, 'config', 'timerProgress.json'), '{"logEnd":12,"timerLo')
    const counts = await deliverAll(image, fake, [])
    expect([...counts.keys()].sort()).toEqual(ALL)
    expect(counts.get('U0')).toBe(2)
  })

  it('a power cut loses the unsynced copies: every due timer is delivered again, the pending ones stay pending', async () => {
    const { image, fake } = await deliverThenImage('lose-unsynced', (d) => d.cutNow())
    const counts = await deliverAll(image, fake, [])
    expect([...counts.keys()].sort()).toEqual(ALL)
    for (const key of ALL) expect(counts.get(key)).toBe(1)
  })

  it('a power cut at other points of the delivery, pages old or new at random, loses no timer', { timeout: 120_000 }, async () => {
    for (const [seed, event] of [
      [1, 40],
      [2, 120],
      [3, 300],
    ]) {
      // The cut comes at the event, or at the end when the run has fewer (cutNow returns the cut taken).
      const { image, fake } = await deliverThenImage('power-loss', (d) => d.cutNow(), seed, event)
      const counts = await deliverAll(image, fake, [], false)
      expect([...counts.keys()].sort()).toEqual(ALL)
    }
  })
})

describe.skipIf(process.platform !== 'linux')('timer steps with power cuts and crashes (Linux only: the power-loss model)', () => {
  for (const [seed, flushDiskType] of [
    [21, 'ASYNC_FLUSH'],
    [22, 'SYNC_FLUSH'],
  ] as const) {
    it(`seed ${seed}, ${flushDiskType}: no durable timer lost, nothing delivered that was not put`, { timeout: 300_000 }, async () => {
      const random = prng(seed)
      const int = (n: number): number => Math.floor(random() * n)
      const root = tempDir('mqstore-timer-steps-')
      let dir = join(root, 'store')
      fs.mkdirSync(dir)
      const fake = new FakeClock()
      const options = { ...SMALL, timerPrecisionMs: 100, flushDiskType, flushIntervalCommitLog: 50 }
      /** Every timer ever acknowledged (a delivered message must be one of them). */
      const ever = new Set<string>()
      /** Timers acknowledged since the last cut or crash: the end of their record in the commit log. */
      let acked = new Map<string, number>()
      /** Timers whose record was on disk at a cut (they must never be lost). */
      const durable = new Set<string>()
      const cancelled = new Set<string>()
      /** Put before a process crash: on disk once the next open's recovery has synced them. */
      let crashed: string[] = []
      let next = 0
      let crashCarry: PowerCut['carry']
      for (let step = 0; step < 6; step++) {
        let store: MessageStore | null = null
        let ackedAtCut = new Map<string, number>()
        let flushedAtCut = -1
        const disk = new PowerLossDisk({
          root: dir,
          seed: seed * 100 + step,
          after: crashCarry,
          cutAtEvent: 200 + int(2000),
          imageRoot: join(root, `images-${step}`),
          onCut: () => {
            ackedAtCut = new Map(acked)
            flushedAtCut = store === null ? -1 : store.stats().commitLogFlushedOffset
          },
        }).arm()
        const crash = int(3) === 0
        try {
          store = await MessageStore.open(dir, { ...options, clock: fake.clock })
          if (disk.cut === null) for (const key of crashed) durable.add(key)
          crashed = []
          checkDelivered(store, ever)
          for (let action = 0; action < 8 && disk.cut === null; action++) {
            const choice = int(10)
            if (choice < 5) {
              const batch = Array.from({ length: 1 + int(8) }, () => {
                const key = `K${next++}`
                const delayMs = int(4) === 0 ? 3_600_000 + int(3_600_000) : 200 + int(3000)
                return { topic: 'later', body: `body of ${key}`, properties: { UNIQ_KEY: key }, delayMs }
              })
              const results = await store.putMessages(batch as never)
              results.forEach((r, i) => {
                if (r.status !== 'PUT_OK') return
                acked.set(batch[i].properties.UNIQ_KEY, r.wroteOffset + r.wroteBytes)
                ever.add(batch[i].properties.UNIQ_KEY)
              })
            } else if (choice < 9) {
              fake.at += int(2500)
              await timerOf(store).deliverDue()
            } else {
              const pendingKeys = [...durable, ...acked.keys()].filter((k) => !cancelled.has(k))
              const key = pendingKeys[int(pendingKeys.length)]
              if (key !== undefined && (await store.cancelTimer(key))) cancelled.add(key)
            }
          }
        } catch (error) {
          // An open cut short, say: the image decides. Anything else fails below.
          if (disk.cut === null) throw error
        }
        const cut = disk.cut ?? (crash ? disk.crashNow() : disk.cutNow())
        // A cut keeps what was flushed (the rest may be lost); a crash keeps every put, durable
        // once the next open's recovery has synced it.
        if (cut.at !== 'process crash') {
          for (const [key, end] of ackedAtCut) if (end <= flushedAtCut) durable.add(key)
        } else {
          crashed = [...acked.keys()]
        }
        acked = new Map()
        crashCarry = cut.carry
        await store?.close().catch(() => {})
        disk.disarm()
        dir = cut.dir
      }
      // The last image: everything durable and not cancelled is delivered once its time comes.
      const store = await MessageStore.open(dir, { ...options, clock: fake.clock })
      for (const key of crashed) durable.add(key)
      try {
        fake.at += 3 * 3_600_000
        await timerOf(store).deliverDue()
        await waitFor(() => store.stats().timer.pending <= 0, 'nothing pending', 60_000)
        const seen = checkDelivered(store, ever)
        for (const key of durable) if (!cancelled.has(key)) expect(seen.has(key), `durable timer ${key} delivered`).toBe(true)
        expect(durable.size).toBeGreaterThan(0)
      } finally {
        await store.close()
      }
    })
  }
})

/** What the real topic holds: only timers that were put, byte for byte; the keys seen. */
function checkDelivered(store: MessageStore, acked: ReadonlySet<string>): Set<string> {
  const seen = new Set<string>()
  for (const m of readAll(store, 'later', 0)) {
    const key = m.properties.UNIQ_KEY
    expect(acked.has(key), `delivered ${key} was put`).toBe(true)
    expect(m.body.toString()).toBe(`body of ${key}`)
    expect(m.properties.TIMER_OUT_MS).toBeUndefined()
    seen.add(key)
  }
  return seen
}
