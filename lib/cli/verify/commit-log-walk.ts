// The sequential walk of the commit log. Each step is decided by the store's own recovery rule
// (scanStep), and the record that stops the walk is classified torn or corrupt by the store's own
// classifier, so the walk ends exactly where an open's recovery scan ends: `validEnd` is what open
// keeps (when its scan covers the same files), and `damage` says whether it truncates or refuses.
import type { DispatchRequest } from '../../store/commitlog/record.js'
import { MESSAGE_MAGIC_CODE, MIN_RECORD_LENGTH } from '../../store/commitlog/record.js'
import { classifyDamage, hidesRecord, scanStep, type RecoveryDamage } from '../../store/commitlog/recovery-scan.js'
import { errorCode, FileWindow, firstNonZero, sleep, yieldToEventLoop, type Segment } from './files.js'
import type { PointerMerge } from './pointer-streams.js'
import { fileScanSource, MAX_RECORD_LENGTH, type CommitLogReader } from './record-reader.js'
import type { CommitLogReport, Problems } from './report.js'

const WALK_CHUNK = 8 * 1024 * 1024
const PROGRESS_STEP = 16 * 1024 * 1024
/** Records walked between two yields to the event loop. */
const RECORDS_PER_YIELD = 4096
/** How long to wait before looking again at a bad record at the live tail of a store. */
const LIVE_TAIL_RETRY_MS = 100

export interface WalkInput {
  files: readonly Segment[]
  fileSize: number
  /** Indexes of files that do not follow the one before them (reported with the layout). */
  gaps: ReadonlySet<number>
  problems: Problems
  notes: string[]
  scratch: Buffer
  reader: CommitLogReader
  merge: PointerMerge
  /** Called for every valid record, after the pointers up to it are settled. */
  onRecord: (at: number, req: DispatchRequest) => void
  onProgress: ((done: number, total: number) => void) | undefined
}

export type WalkResult = Pick<CommitLogReport, 'records' | 'bytes' | 'validEnd' | 'endReason' | 'lastStoreTimestamp' | 'damage'> & {
  /** The walk ended at the end of the data with nothing after it: the log may only have grown since. */
  endIsClean: boolean
  grewDuringCheck: boolean
}

/** What a stop at damage means for an open, in words. */
function consequence(damage: RecoveryDamage): string {
  return damage.kind === 'torn'
    ? 'a torn write: only zeros follow; open truncates here'
    : "corrupt: data follows; open truncates here with corruptionPolicy 'tolerant' and refuses to open with 'strict'"
}

export async function walkCommitLog(input: WalkInput): Promise<WalkResult> {
  const { files, fileSize, problems, merge } = input
  const source = fileScanSource(files, fileSize)
  const out: WalkResult = {
    records: 0,
    bytes: 0,
    validEnd: files.length > 0 ? files[0].start : 0,
    endReason: files.length === 0 ? 'empty' : 'end-of-files',
    lastStoreTimestamp: 0,
    damage: null,
    endIsClean: files.length === 0,
    grewDuringCheck: false,
  }
  const total = files.reduce((sum, f) => sum + f.size, 0)
  let doneBefore = 0
  let lastProgress = 0
  input.onProgress?.(0, total)
  const window = new FileWindow(WALK_CHUNK)
  let retriedAt = -1
  let sinceYield = 0
  try {
    walk: for (let i = 0; i < files.length; i++) {
      const f = files[i]
      if (input.gaps.has(i)) {
        // Reported with the layout: the store cannot reach past a gap.
        out.endReason = 'gap'
        out.validEnd = files[i - 1].start + fileSize
        break
      }
      try {
        window.use(f.path, f.size)
      } catch (error) {
        if (errorCode(error) !== 'ENOENT') throw error
        problems.add({ file: f.rel, offset: 0, phyOffset: f.start, reason: 'deleted during the check' })
        out.endReason = 'damage'
        out.validEnd = f.start
        break
      }
      const stop = (pos: number, reason: string): void => {
        problems.add({ file: f.rel, offset: pos, phyOffset: f.start + pos, reason })
        out.endReason = 'damage'
        out.validEnd = f.start + pos
      }
      const stopAtDamage = (pos: number, reason: string): void => {
        const damage = classifyDamage(source, i, pos, reason)
        out.damage = damage
        stop(pos, `${reason}; ${consequence(damage)}`)
      }
      let pos = 0
      for (;;) {
        if (input.onProgress !== undefined && doneBefore + pos - lastProgress >= PROGRESS_STEP) {
          lastProgress = doneBefore + pos
          input.onProgress(lastProgress, total)
        }
        if (f.size !== fileSize && pos + 8 > f.size) {
          stop(pos, `the file ends after ${f.size} bytes (truncated?) before a blank record closes it`)
          break walk
        }
        let p = window.load(pos, 8)
        const head = Math.min(window.available(pos), f.size - pos)
        if (head < 8 && pos + 8 <= f.size) {
          stop(pos, 'the file became shorter during the check')
          break walk
        }
        const totalSize = head >= 8 ? window.buf.readInt32BE(p) : 0
        const magic = head >= 8 ? window.buf.readInt32BE(p + 4) : 0
        if (totalSize > MAX_RECORD_LENGTH && magic === MESSAGE_MAGIC_CODE && totalSize <= f.size - pos) {
          stopAtDamage(pos, `TOTALSIZE ${totalSize} is larger than any record this check reads (${MAX_RECORD_LENGTH} bytes)`)
          break walk
        }
        if (totalSize >= MIN_RECORD_LENGTH && totalSize <= f.size - pos) p = window.load(pos, totalSize)
        const limit = p + Math.min(window.available(pos), f.size - pos)
        const step = scanStep(window.buf, p, limit, f.start + pos, true)
        if (step.kind === 'record') {
          const at = f.start + pos
          const req = step.request
          out.records++
          out.bytes += req.size
          out.lastStoreTimestamp = req.storeTimestamp
          merge.onRecord(at, req)
          input.onRecord(at, req)
          pos += req.size
          if (++sinceYield >= RECORDS_PER_YIELD) {
            sinceYield = 0
            await yieldToEventLoop()
          }
          continue
        }
        if (step.kind === 'blank') {
          const expected = fileSize - pos
          if (totalSize !== expected) {
            // Readers (and recovery) go to the next file whatever the blank says: worth a note only.
            input.notes.push(`${f.rel} @${pos}: the blank record that closes the file says ${totalSize} bytes, ${expected} remain`)
          }
          out.validEnd = f.start + fileSize
          out.endIsClean = i === files.length - 1
          doneBefore += f.size
          continue walk
        }
        if (step.kind === 'end') {
          out.endReason = 'end-of-data'
          out.validEnd = f.start + pos
          endOfData(input, out, i, pos, source)
          break walk
        }
        // A store being written may show a record half-appended at its tail: look again once.
        if (i === files.length - 1 && retriedAt !== f.start + pos) {
          retriedAt = f.start + pos
          await sleep(LIVE_TAIL_RETRY_MS)
          window.invalidate()
          continue
        }
        stopAtDamage(pos, step.reason)
        break walk
      }
    }
  } finally {
    window.close()
  }
  input.onProgress?.(total, total)
  return out
}

/**
 * The walk met the end of the data (zeros). Whatever non-zero bytes follow, recovery ignores them
 * and the next appends overwrite them. Valid records among them were cut off by a zeroed header:
 * that is lost data, a problem. Anything else is noise in unused space: a note.
 */
function endOfData(input: WalkInput, out: WalkResult, index: number, pos: number, source: ReturnType<typeof fileScanSource>): void {
  const { files, reader, scratch } = input
  const found = firstNonZero(files, index, pos, scratch)
  out.endIsClean = found === null
  if (found === null) return
  // A header that is no longer zero and now holds a valid record: appended since we looked.
  if (found.index === index && found.pos < pos + 8 && typeof reader.recordAt(out.validEnd) !== 'string') {
    out.grewDuringCheck = true
    out.endIsClean = true
    return
  }
  const g = files[found.index]
  let lost = false
  for (let i = index; !lost && i < files.length; i++) lost = hidesRecord(source, i, i === index ? pos : 0, files[i].size)
  if (lost) {
    input.problems.add({
      file: g.rel,
      offset: found.pos,
      phyOffset: g.start + found.pos,
      reason: `non-zero bytes after the end of the data at ${out.validEnd} (a zeroed record header?), and valid records among them: a recovery would discard them`,
    })
  } else {
    input.notes.push(
      `${g.rel} @${found.pos}: non-zero bytes after the end of the data at ${out.validEnd} hold no valid record; open ignores them and appends overwrite them`,
    )
  }
}
