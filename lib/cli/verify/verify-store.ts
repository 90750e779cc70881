// verifyStore: lists the files, checks their layout, then makes one sequential pass over the
// commit log with every consume-queue unit and index entry merged in (see pointer-streams.ts).
import * as fs from 'node:fs'
import { join } from 'node:path'

import { SCHEDULE_TOPIC } from '../../store/commitlog/record.js'
import { isQueuedRecord } from '../../store/commitlog/sys-flag.js'
import { BEGIN_PHY_OFFSET_OFFSET, indexCoverageBreak, isIndexFileName, type IndexCoverage } from '../../store/index/index-layout.js'
import { isTempSegmentName } from '../../store/mapped/segment-name.js'
import { CQ_STORE_UNIT_SIZE } from '../../store/queue/cq-unit.js'
import { loadDelayOffsets } from '../../store/schedule/delay-offsets.js'
import { timerFileNotes } from '../../store/timer/timer-files.js'
import {
  ABORT_FILE,
  CHECKPOINT_FILE,
  COMMITLOG_DIR,
  CONFIG_DIR,
  CONSUME_QUEUE_DIR,
  DELAY_OFFSET_FILE,
  INDEX_DIR,
} from '../../store/store-paths.js'
import { checkCheckpoint } from './checkpoint-check.js'
import { walkCommitLog } from './commit-log-walk.js'
import {
  checkSegmentLayout,
  errorCode,
  inferFileSize,
  isDirectory,
  listDir,
  listSegments,
  mostCommon,
  scanScratch,
  type Segment,
} from './files.js'
import { checkIndexChains, indexDimensions, IndexStream, KeyHashCache, type IndexContext } from './index-check.js'
import { PointerMerge } from './pointer-streams.js'
import { QueueStream, type CqContext } from './queue-stream.js'
import { CommitLogReader } from './record-reader.js'
import { NotAStoreError, Problems, type IndexFileReport, type VerifyOptions, type VerifyReport } from './report.js'
import { StorePaths } from '../../store/store-paths.js'
import { readStoreSizesRecord } from '../../store/store-sizes.js'

const STORE_ENTRIES = [COMMITLOG_DIR, CONSUME_QUEUE_DIR, INDEX_DIR, CHECKPOINT_FILE]
/** At most this much memory for unit buffers, however many queues there are. */
const CQ_BUFFER_BUDGET = 32 * 1024 * 1024

interface QueueFiles {
  topic: string
  queueId: number
  dir: string
  rel: string
  files: Segment[]
}

function tempNote(rel: string): string {
  return `${rel}: a temporary file (a file being created, or left by an interrupted creation), ignored`
}

/** The consume-queue folders: `consumequeue/<topic>/<queueId>/`. */
function listQueues(dir: string, problems: Problems, notes: string[]): QueueFiles[] {
  const queues: QueueFiles[] = []
  const root = join(dir, CONSUME_QUEUE_DIR)
  for (const topic of (listDir(root) ?? []).sort()) {
    if (!isDirectory(join(root, topic))) {
      notes.push(`${CONSUME_QUEUE_DIR}/${topic}: not a directory, ignored`)
      continue
    }
    for (const name of (listDir(join(root, topic)) ?? []).sort()) {
      if (!/^\d{1,10}$/.test(name) || Number(name) > 0x7fffffff) {
        notes.push(`${CONSUME_QUEUE_DIR}/${topic}/${name}: not a queue id, ignored (as the store does)`)
        continue
      }
      const queueDir = join(root, topic, name)
      if (!isDirectory(queueDir)) continue
      const rel = `${CONSUME_QUEUE_DIR}/${topic}/${name}`
      queues.push({ topic, queueId: Number(name), dir: queueDir, rel, files: listSegments(queueDir, rel, problems, notes) })
    }
  }
  return queues
}

interface IndexFiles {
  files: number
  entries: number
  details: IndexFileReport[]
  streams: IndexStream[]
}

/** Index files: names, dimensions and hash chains; their entries become pointer streams. */
function checkIndexFiles(dir: string, options: VerifyOptions, context: IndexContext, notes: string[]): IndexFiles {
  const out: IndexFiles = { files: 0, entries: 0, details: [], streams: [] }
  const ixDir = join(dir, INDEX_DIR)
  const covered: { rel: string; coverage: IndexCoverage }[] = []
  for (const name of (listDir(ixDir) ?? []).sort()) {
    const rel = `${INDEX_DIR}/${name}`
    if (isTempSegmentName(name)) {
      notes.push(tempNote(rel))
      continue
    }
    const path = join(ixDir, name)
    let size: number
    try {
      const stat = fs.statSync(path)
      if (!stat.isFile() || !isIndexFileName(name)) {
        context.problems.add({ file: rel, offset: 0, reason: 'not an index file name (yyyyMMddHHmmssSSS): the store would refuse to load' })
        continue
      }
      size = stat.size
    } catch (error) {
      if (errorCode(error) === 'ENOENT') continue
      throw error
    }
    out.files++
    const dims = indexDimensions(size, options)
    if (typeof dims === 'string') {
      context.problems.add({ file: rel, offset: 0, reason: dims })
      out.details.push({ file: rel, hashSlotNum: 0, indexNum: 0, entries: 0 })
      continue
    }
    const { entries, coverage } = checkIndexChains(path, rel, dims, context.problems)
    covered.push({ rel, coverage })
    out.entries += entries
    out.details.push({ file: rel, ...dims, entries })
    out.streams.push(new IndexStream(context, rel, path, dims.hashSlotNum, entries + 1))
  }
  // The store's coverage rule over the files it would load: breaking it makes open rebuild the index.
  const broken = indexCoverageBreak(covered.map((c) => c.coverage))
  if (broken !== null) {
    const { rel, coverage } = covered[broken.index]
    context.problems.add({
      file: rel,
      offset: BEGIN_PHY_OFFSET_OFFSET,
      reason:
        `the header says the file covers commit-log offsets ${coverage.beginPhyOffset}..${coverage.endPhyOffset}, ` +
        `which does not follow the end (${broken.previousEnd}) of the file before it: open deletes the index and rebuilds it`,
    })
  }
  return out
}

/** Checks the store in `dir` without changing anything; see index.ts for what is checked. */
export async function verifyStore(dir: string, options: VerifyOptions = {}): Promise<VerifyReport> {
  const began = Date.now()
  if (!isDirectory(dir)) throw new NotAStoreError(`${dir} is not a directory`)
  if (!STORE_ENTRIES.some((name) => fs.existsSync(join(dir, name)))) {
    throw new NotAStoreError(`${dir} is not a store (it has none of ${STORE_ENTRIES.join(', ')})`)
  }
  const givenDims = { maxHashSlotNum: options.maxHashSlotNum, maxIndexNum: options.maxIndexNum }
  options = withRecordedIndexDims(dir, options)
  const maxProblems = options.maxProblems ?? 100
  const notes: string[] = []
  const scratch = scanScratch()

  // ---- commit-log files
  const clProblems = new Problems(maxProblems)
  const clDir = join(dir, COMMITLOG_DIR)
  const clFiles = listSegments(clDir, COMMITLOG_DIR, clProblems, notes)
  const clFileSize = inferFileSize(clFiles)
  const clGaps = checkSegmentLayout(clFiles, clFileSize, clProblems, 'commit-log')
  const minOffset = clFiles.length > 0 ? clFiles[0].start : 0

  // ---- consume-queue files
  const cqProblems = new Problems(maxProblems)
  const cqCounts = { units: 0, expired: 0, blanks: 0, extTags: 0, appended: 0 }
  const queues = listQueues(dir, cqProblems, notes)
  const allCqFiles = queues.flatMap((q) => q.files)
  const cqFileSize = mostCommon(allCqFiles.map((f) => f.size))
  if (cqFileSize % CQ_STORE_UNIT_SIZE !== 0) {
    cqProblems.add({
      file: allCqFiles[0].rel,
      offset: 0,
      reason: `the consume-queue files are ${cqFileSize} bytes, not a multiple of the ${CQ_STORE_UNIT_SIZE}-byte unit`,
    })
  }
  for (const q of queues) checkSegmentLayout(q.files, cqFileSize, cqProblems, 'consume-queue')
  const unitsPerChunk = Math.max(16, Math.min(4096, Math.floor(CQ_BUFFER_BUDGET / Math.max(1, queues.length) / CQ_STORE_UNIT_SIZE)))
  const cqContext: CqContext = { problems: cqProblems, notes, scratch, chunk: unitsPerChunk * CQ_STORE_UNIT_SIZE, counts: cqCounts }

  // ---- index files (hash chains are checked here, entries against records during the walk)
  const ixProblems = new Problems(maxProblems)
  const ixContext: IndexContext = { problems: ixProblems, counts: { expired: 0 }, keyHashes: new KeyHashCache() }
  const index = checkIndexFiles(dir, options, ixContext, notes)

  // ---- the walk, with every pointer stream merged in
  const reader = new CommitLogReader(clFiles, () => listSegments(clDir, COMMITLOG_DIR, new Problems(0), []))
  const merge = new PointerMerge(reader, minOffset)
  const queueStreams = new Map<string, QueueStream>()
  for (const q of queues) {
    const stream = new QueueStream(cqContext, q.topic, q.queueId, [...q.files], () => listSegments(q.dir, q.rel, new Problems(0), []))
    queueStreams.set(`${q.topic}\u0000${q.queueId}`, stream)
    merge.add(stream)
  }
  for (const s of index.streams) merge.add(s)
  /** Per (topic, queueId): the queue offset after the last record of the queue seen in the walk. */
  const recordQueues = new Map<string, { topic: string; queueId: number; next: number }>()
  let walk: Awaited<ReturnType<typeof walkCommitLog>>
  try {
    walk = await walkCommitLog({
      files: clFiles,
      fileSize: clFileSize,
      gaps: clGaps,
      problems: clProblems,
      notes,
      scratch,
      reader,
      merge,
      onProgress: options.onProgress,
      onRecord(_at, req) {
        if (!isQueuedRecord(req.sysFlag)) return
        const key = `${req.topic}\u0000${req.queueId}`
        const seen = recordQueues.get(key)
        if (seen === undefined) recordQueues.set(key, { topic: req.topic, queueId: req.queueId, next: req.queueOffset + 1 })
        else if (req.queueOffset >= seen.next) seen.next = req.queueOffset + 1
      },
    })
    merge.finish({ validEnd: walk.validEnd, endIsClean: walk.endIsClean })
  } finally {
    reader.close()
  }
  const cleanShutdown = !fs.existsSync(join(dir, ABORT_FILE))

  // ---- every dispatched record must have its unit: a queue may not end before its records do
  let missing = 0
  for (const [key, seen] of recordQueues) {
    const stream = queueStreams.get(key)
    const have = stream?.nextQueueOffset ?? 0
    if (seen.next <= have) continue
    missing += seen.next - have
    const name = `${seen.topic}/${seen.queueId}`
    const what = `the commit log has records of ${name} up to queue offset ${seen.next - 1}, but its consume queue ${
      have === 0 ? 'has no units' : `ends at queue offset ${have}`
    }: ${seen.next - have} messages cannot be consumed`
    if (cleanShutdown) {
      const file = stream !== undefined && stream.endRel !== '' ? stream.endRel : `${CONSUME_QUEUE_DIR}/${name}`
      cqProblems.add({ file, offset: stream?.endPos ?? 0, queueOffset: have, reason: what })
    } else {
      notes.push(`${what} (the store is open or was not shut down cleanly; its next open dispatches them)`)
    }
  }
  if (cqCounts.appended > 0) notes.push(`${cqCounts.appended} consume queues had units appended during the check; those were not checked`)
  if (walk.grewDuringCheck || merge.grewDuringCheck) {
    notes.push(
      'the store was written during the check: records appended after the walk reached the end were checked only through the units and entries pointing at them',
    )
  }
  if (cqCounts.extTags > 0)
    notes.push(`${cqCounts.extTags} units hold consume-queue extension addresses; their tags codes were not checked`)

  notes.push(...delayOffsetNotes(dir, queues))
  notes.push(...timerFileNotes(dir, join(dir, CONFIG_DIR)))
  const checkpoint = checkCheckpoint(dir, maxProblems, givenDims, cleanShutdown)
  const problemCount = clProblems.count + cqProblems.count + ixProblems.count + checkpoint.problems.length + checkpoint.moreProblems
  return {
    ok: problemCount === 0,
    problemCount,
    dir,
    commitLog: {
      files: clFiles.length,
      fileSize: clFileSize,
      records: walk.records,
      bytes: walk.bytes,
      minOffset,
      validEnd: walk.validEnd,
      endReason: walk.endReason,
      lastStoreTimestamp: walk.lastStoreTimestamp,
      damage: walk.damage,
      problems: clProblems.problems,
      moreProblems: clProblems.moreProblems,
    },
    consumeQueues: {
      queues: queues.length,
      files: allCqFiles.length,
      fileSize: cqFileSize,
      units: cqCounts.units,
      expired: cqCounts.expired,
      blanks: cqCounts.blanks,
      missing,
      problems: cqProblems.problems,
      moreProblems: cqProblems.moreProblems,
    },
    index: {
      files: index.files,
      entries: index.entries,
      expired: ixContext.counts.expired,
      details: index.details,
      problems: ixProblems.problems,
      moreProblems: ixProblems.moreProblems,
    },
    checkpoint,
    cleanShutdown,
    notes,
    elapsedMs: Date.now() - began,
  }
}

/** Index dimensions not given are taken from the store's sizes record, as open takes them. */
function withRecordedIndexDims(dir: string, options: VerifyOptions): VerifyOptions {
  if (options.maxHashSlotNum !== undefined || options.maxIndexNum !== undefined) return options
  try {
    const recorded = readStoreSizesRecord(new StorePaths(dir).storeSizes)
    return recorded === null ? options : { ...options, maxHashSlotNum: recorded.maxHashSlotNum, maxIndexNum: recorded.maxIndexNum }
  } catch {
    return options // a damaged record is reported by the checkpoint check
  }
}

/**
 * What is off in config/delayOffset.json (the schedule service's progress): a damaged file, or a
 * level whose progress lies past the end of its schedule queue. Notes, not problems: open repairs
 * both (rebuilt from the queues; clamped to the queue), at the cost of deliveries repeated.
 */
function delayOffsetNotes(
  dir: string,
  queues: readonly { topic: string; queueId: number; files: readonly { size: number }[] }[],
): string[] {
  const { table, damage, fromBackup } = loadDelayOffsets(join(dir, CONFIG_DIR, DELAY_OFFSET_FILE))
  const notes: string[] = []
  if (damage !== null) {
    notes.push(
      `config/${DELAY_OFFSET_FILE}: ${damage}; ${fromBackup ? 'its .bak copy is used' : 'open rebuilds it from the schedule queues (messages may be delivered again)'}`,
    )
  }
  for (const [level, offset] of table) {
    const queue = queues.find((q) => q.topic === SCHEDULE_TOPIC && q.queueId === level - 1)
    if (queue === undefined && offset > 0)
      notes.push(`config/${DELAY_OFFSET_FILE}: level ${level} has progress ${offset} but no schedule queue`)
  }
  return notes
}
