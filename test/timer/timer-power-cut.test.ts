// The timer across a process crash and a power cut, on the power-loss model's disk images, with
// timers both due (delivered, their copies in the page cache only) and pending (days ahead):
// - a process crash keeps the page cache: the progress note (config/timerProgress.json) says what
//   was delivered, so the reopened store repeats none of it, and the pending ones stay pending;
// - a note whose deliveries the logs lost (as a power cut leaves one the kernel wrote back) is
//   not trusted: config/timercheck decides and the due ones go again (same UNIQ_KEY);
// - a power cut loses the unsynced copies and the note: nothing is lost, the due ones go again.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/store/message-store.js'
import { PowerLossDisk } from '../helpers/power-loss.js'
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
