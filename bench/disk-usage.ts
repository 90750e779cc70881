// Disk bytes per stored byte: how much disk a store takes (allocated blocks, not logical file
// sizes) after 1, 10,000 and 1,000,000 messages of 256 bytes, with the embedded defaults. Blocks
// are reserved in chunks ahead of the writer, so a small store is small.
//
//   npm run bench:disk                      # 1, 10k, 1M
//   node dist/bench/disk-usage.js 1 1000    # other counts
import { MessageStore } from '../lib/index.js'
import { diskUsage, log, makeTempDir, removeDir } from './workload.js'

const BODY_BYTES = 256
const BATCH = 1_000
const MB = 1024 * 1024

interface Row {
  messages: number
  bodyBytes: number
  logBytes: number
  diskBytes: number
}

async function measure(count: number): Promise<Row> {
  const dir = makeTempDir('disk')
  try {
    const store = await MessageStore.open(dir, { flushDiskType: 'ASYNC_FLUSH' })
    const body = Buffer.alloc(BODY_BYTES, 0x61)
    for (let done = 0; done < count; ) {
      const n = Math.min(BATCH, count - done)
      const batch = Array.from({ length: n }, (_, i) => ({
        topic: `T${(done + i) % 4}`,
        queueId: (done + i) % 4,
        body,
        keys: [`k${done + i}`],
      }))
      const results = await store.putMessages(batch)
      const failed = results.find((r) => r.status !== 'PUT_OK')
      if (failed !== undefined) throw new Error(`put failed: ${failed.status} ${failed.reason ?? ''}`)
      done += n
    }
    const logBytes = store.stats().commitLogMaxOffset
    await store.close()
    return { messages: count, bodyBytes: count * BODY_BYTES, logBytes, diskBytes: diskUsage(dir) }
  } finally {
    removeDir(dir)
  }
}

async function main(): Promise<void> {
  const counts = process.argv.slice(2).map(Number)
  const runs = counts.length > 0 && counts.every((n) => Number.isSafeInteger(n) && n > 0) ? counts : [1, 10_000, 1_000_000]
  const rows: Row[] = []
  for (const count of runs) {
    log(`disk usage: ${count} messages...`)
    rows.push(await measure(count))
  }
  const header = ['messages', 'body MB', 'commit log MB', 'disk MB', 'disk / body byte', 'disk / log byte']
  const table = rows.map((r) => [
    r.messages.toLocaleString('en-US'),
    (r.bodyBytes / MB).toFixed(3),
    (r.logBytes / MB).toFixed(3),
    (r.diskBytes / MB).toFixed(1),
    (r.diskBytes / r.bodyBytes).toFixed(2),
    (r.diskBytes / r.logBytes).toFixed(2),
  ])
  console.log(`| ${header.join(' | ')} |`)
  console.log(`| ${header.map(() => '---').join(' | ')} |`)
  for (const row of table) console.log(`| ${row.join(' | ')} |`)
}

await main()
