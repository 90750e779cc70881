// `npm start`: a short tour of mqstore on ./data — produce over several topics and queues,
// consume with consume(), query by key and by time, print stats, run a retention pass, close.
import * as fs from 'node:fs'
import { resolve } from 'node:path'

import { describeCommitLogPlan } from '../store/cleanup/commit-log-policy.js'
import { percent } from '../store/cleanup/disk-policy.js'
import { MessageStore } from '../store/message-store.js'
import { EXIT, type Command } from './frame.js'

const TOPICS = ['orders', 'payments', 'shipments']
const QUEUES = 4
const PER_TOPIC = 2000

export interface DemoSummary {
  dir: string
  reusedStore: boolean
  produced: number
  consumed: number
  keysFound: number
  commitLogMaxOffset: number
  elapsedMs: number
}

/** Runs the tour on `dir`, telling what it does through `line` (stdout by default). */
export async function runDemo(
  dir: string,
  line: (text?: string) => void = (text = '') => process.stdout.write(`${text}\n`),
): Promise<DemoSummary> {
  let produced = 0
  let consumed = 0
  let keysFound = 0
  const began = Date.now()
  line(`mqstore demo — store directory ${dir}`)
  const reused = fs.existsSync(dir)
  const store = await MessageStore.open(dir, {
    // Small files so the demo shows several of them; the defaults are 128 MiB commit-log files.
    mappedFileSizeCommitLog: 1024 * 1024,
    mappedFileSizeConsumeQueue: 20 * 1000,
    maxHashSlotNum: 10_000,
    maxIndexNum: 40_000,
    // Keep files 0 hours, so that step 5's manual retention pass has something to delete: every
    // commit-log file but the newest. Left alone, passes run at 04:00 or under disk pressure only.
    fileReservedTime: 0,
  })
  const before = store.stats()
  line(`opened (${reused ? 'existing store' : 'new store'}, last shutdown ${before.lastExitOK ? 'clean' : 'NOT clean: recovered'})`)

  // 1. Produce: each topic gets PER_TOPIC messages spread over its queues, with a tag and a key.
  line()
  line(`1. producing ${TOPICS.length * PER_TOPIC} messages over ${TOPICS.length} topics × ${QUEUES} queues`)
  const firstKeys: string[] = []
  for (const topic of TOPICS) {
    const batch = []
    for (let i = 0; i < PER_TOPIC; i++) {
      const key = `${topic}-${Date.now().toString(36)}-${i}`
      if (i === 42) firstKeys.push(key)
      batch.push({
        topic,
        queueId: i % QUEUES,
        body: JSON.stringify({ topic, n: i, at: new Date().toISOString() }),
        tags: i % 3 === 0 ? 'priority' : 'normal',
        keys: [key],
        properties: { source: 'demo' },
      })
    }
    const results = await store.putMessages(batch)
    const ok = results.filter((r) => r.status === 'PUT_OK').length
    produced += ok
    const last = results[results.length - 1]
    line(`   ${topic.padEnd(10)} ${ok}/${batch.length} PUT_OK, last at commit-log offset ${last.wroteOffset}, msgId ${last.msgId}`)
  }

  // 2. Consume queue 0 of each topic from the group's committed offset, committing as we go.
  line()
  line('2. consuming queue 0 of each topic as group "demo-group", committing as it goes')
  for (const topic of TOPICS) {
    const max = store.getMaxOffsetInQueue(topic, 0)
    const subscription = store.consume({ group: 'demo-group', topic, queueId: 0, autoCommit: true })
    let count = 0
    let priority = 0
    let sample = ''
    // consume() tails the queue and would wait for more; stop once we reach what is there now.
    for await (const message of subscription) {
      count++
      if (message.tags === 'priority') priority++
      if (sample === '') sample = message.body.toString()
      if (subscription.position >= max) break
    }
    consumed += count
    line(
      `   ${topic.padEnd(10)} ${count} messages (${priority} tagged priority), committed offset ${store.queryOffset('demo-group', topic, 0)} of ${max}`,
    )
    line(`   ${''.padEnd(10)} first: ${sample}`)
  }
  const priorityOnly = store.getMessage('demo-group', 'orders', 0, 0, 8, { tags: ['priority'] })
  line(
    `   getMessage with tag filter "priority": ${priorityOnly.messages.length} of the first ${priorityOnly.nextBeginOffset} units matched`,
  )

  // 3. Query by key (hash index) and by time (binary search of a consume queue).
  line()
  line('3. queries')
  for (const key of firstKeys) {
    const topic = key.split('-')[0]
    const found = store.queryMessage(topic, key, 32, 0, Date.now() + 1000)
    const m = found.messages[0]
    keysFound += found.messages.length
    line(`   by key ${key}: ${found.messages.length} found, queue ${m?.queueId} offset ${m?.queueOffset}`)
  }
  const middle = store.getMessageStoreTimeStamp('orders', 1, Math.floor(store.getMaxOffsetInQueue('orders', 1) / 2))
  const byTime = store.getOffsetInQueueByTime('orders', 1, middle)
  line(`   by time ${new Date(middle).toISOString()}: orders/1 offset ${byTime}`)
  const got = store.getMessage('demo-group', 'payments', 2, 0, 5)
  line(
    `   getMessage payments/2 from 0: ${got.status}, ${got.messages.length} messages, next ${got.nextBeginOffset}, range [${got.minOffset}, ${got.maxOffset})`,
  )
  const overflow = store.getMessage('demo-group', 'payments', 2, got.maxOffset, 5)
  line(`   getMessage payments/2 at its end: ${overflow.status}`)

  // 4. Stats.
  const stats = store.stats()
  line()
  line('4. stats')
  line(
    `   puts ${stats.putMessageTimesTotal} (${(stats.putMessageSizeTotal / 1024).toFixed(0)} KiB, average ${stats.putMessageAverageSize.toFixed(0)} B), failed ${stats.putMessageFailedTimes}`,
  )
  line(
    `   commit log [${stats.commitLogMinOffset}, ${stats.commitLogMaxOffset}), ${stats.consumeQueueCount} consume queues, ${stats.indexFileCount} index file(s)`,
  )
  line(`   put latency max ${stats.putMessageEntireTimeMax} ms, get latency max ${stats.getMessageEntireTimeMax} ms`)

  // 5. Retention: what a pass would delete and why, then a manual pass (as at 04:00 or under disk
  // pressure), and a read below the new minimum.
  line()
  line('5. retention')
  for (const reading of stats.diskUsage) line(`   disk ${reading.role}: ${percent(reading.usedRatio)} used`)
  store.executeDeleteFilesManually()
  const plan = await store.planCleanup()
  for (const text of describeCommitLogPlan(plan.commitLog)) line(`   ${text}`)
  const pass = await store.runCleanupPass()
  line(
    `   pass (${pass.reason ?? 'nothing due'}): deleted ${pass.commitLogFiles} commit-log, ${pass.consumeQueueFiles} consume-queue, ` +
      `${pass.indexFiles} index file(s), ${(pass.bytes / 1024).toFixed(0)} KiB; commit log now starts at ${pass.commitLogMinOffset}`,
  )
  const below = store.getMessage('demo-group', 'orders', 0, 0, 1)
  line(`   getMessage orders/0 from 0: ${below.status}${below.status === 'OFFSET_TOO_SMALL' ? `, next ${below.nextBeginOffset}` : ''}`)

  // 6. Clean: close cleanly (flush, checkpoint, remove the abort file), then show what is on disk.
  await store.close()
  line()
  line('6. closed cleanly; files on disk:')
  for (const sub of ['commitlog', 'index']) {
    const files = fs.readdirSync(resolve(dir, sub))
    line(`   ${sub}/ ${files.length} file(s): ${files.slice(0, 4).join(', ')}${files.length > 4 ? ', …' : ''}`)
  }
  line(`   consumequeue/ ${fs.readdirSync(resolve(dir, 'consumequeue')).join(', ')}`)
  line(`   config/consumerOffset.json, checkpoint, lock`)
  line()
  line(`done in ${Date.now() - began} ms — run again to append to the same store (rm -rf ${dir} to start over)`)
  return {
    dir,
    reusedStore: reused,
    produced,
    consumed,
    keysFound,
    commitLogMaxOffset: stats.commitLogMaxOffset,
    elapsedMs: Date.now() - began,
  }
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'write, consume, query and close a store in dir (default ./data)',
  synopsis: 'demo [dir]',
  description: `A short tour: produces 6,000 messages over three topics, consumes queue 0 of each as a group
(committing offsets), queries by key and by time, prints stats and closes cleanly. Running it again
appends to the same store. Takes the store's lock (exit code 3 when another process has it open).
With --json, prints only a summary object.`,
  positionals: [0, 1],
  async run(ctx) {
    const summary = await runDemo(resolve(ctx.positionals[0] ?? 'data'), ctx.json ? () => {} : ctx.line)
    if (ctx.json) ctx.emitJson(summary)
    return EXIT.OK
  },
}
