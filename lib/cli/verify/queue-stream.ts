// The units of one consume queue as a pointer stream: each unit is decoded and judged valid by the
// consume queue's own unit codec (cq-unit.ts), then matched against the record it points at.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'

import type { DispatchRequest } from '../../store/commitlog/record.js'
import { isQueuedRecord } from '../../store/commitlog/sys-flag.js'
import {
  CQ_STORE_UNIT_SIZE,
  isBlankUnit,
  isEndUnit,
  isExtAddress,
  isValidUnit,
  queueOffsetAt,
  readUnitOffset,
  readUnitSize,
  readUnitTagsCode,
} from '../../store/queue/cq-unit.js'
import { errorCode, firstNonZero, readFully, type Segment } from './files.js'
import type { PointerStream } from './pointer-streams.js'
import type { Problems } from './report.js'

export interface CqContext {
  problems: Problems
  notes: string[]
  scratch: Buffer
  chunk: number
  counts: { units: number; expired: number; blanks: number; extTags: number; appended: number }
}

/** How far past the end of a queue's data the stream looks for stray units (cheap: many queues). */
const CQ_TAIL_PROBE = 64 * 1024

/** The units of one consume queue, read in chunks (no file stays open between reads). */
export class QueueStream implements PointerStream {
  phy = 0
  private size = 0
  private tagsCode = 0
  private queueOffset = 0
  private rel = ''
  private pos = 0

  private fileIndex = 0
  private filePos = 0
  private buf: Buffer | null = null
  private bufFile = -1
  private bufStart = 0
  private bufLen = 0
  private seenUnit = false
  /** The queue offset after the last valid unit (0 when there is none). */
  nextQueueOffset = 0
  /** Where the queue's data ends: file and position (for problems about the end). */
  endRel = ''
  endPos = 0

  constructor(
    private readonly ctx: CqContext,
    private readonly topic: string,
    private readonly queueId: number,
    private readonly files: Segment[],
    /** Lists the queue's files again (a live queue may add one while it is read). */
    private readonly relist: () => Segment[],
  ) {}

  private relisted = false

  /** Index in `buf` of the unit at (fileIndex, filePos); -1 when the file cannot be read there. */
  private load(f: Segment, pos: number): number {
    if (this.bufFile === this.fileIndex && pos >= this.bufStart && pos + CQ_STORE_UNIT_SIZE <= this.bufStart + this.bufLen) {
      return pos - this.bufStart
    }
    this.buf ??= Buffer.allocUnsafe(this.ctx.chunk)
    let fd: number
    try {
      fd = fs.openSync(f.path, 'r')
    } catch (error) {
      if (errorCode(error) !== 'ENOENT') throw error
      this.ctx.notes.push(`${f.rel}: deleted during the check; its units were not checked`)
      return -1
    }
    try {
      this.bufLen = readFully(fd, this.buf, 0, Math.min(this.buf.length, f.size - pos), pos)
    } finally {
      fs.closeSync(fd)
    }
    this.bufFile = this.fileIndex
    this.bufStart = pos
    return this.bufLen >= CQ_STORE_UNIT_SIZE ? 0 : -1
  }

  advance(): boolean {
    const { problems, counts } = this.ctx
    for (;;) {
      const f = this.files[this.fileIndex]
      if (f === undefined) {
        // Every listed file was full: a live store may have started the next one since.
        const last = this.files[this.files.length - 1]
        if (this.relisted || last === undefined) return this.finish()
        this.relisted = true
        this.files.push(...this.relist().filter((x) => x.start > last.start))
        continue
      }
      const usable = f.size - (f.size % CQ_STORE_UNIT_SIZE)
      if (this.filePos + CQ_STORE_UNIT_SIZE > usable) {
        this.fileIndex++
        this.filePos = 0
        continue
      }
      const at = this.filePos
      const p = this.load(f, at)
      if (p < 0) {
        this.fileIndex++
        this.filePos = 0
        continue
      }
      const buf = this.buf!
      const offset = readUnitOffset(buf, p)
      const size = readUnitSize(buf, p)
      const tagsCode = readUnitTagsCode(buf, p)
      this.filePos += CQ_STORE_UNIT_SIZE
      const queueOffset = queueOffsetAt(f.start + at)
      if (isEndUnit(offset, size, tagsCode)) {
        this.endOfData(this.fileIndex, at)
        return this.finish()
      }
      if (isBlankUnit(offset, size)) {
        counts.blanks++
        if (this.seenUnit) {
          problems.add({ file: f.rel, offset: at, queueOffset, reason: 'a pre-fill blank unit after real units' })
        }
        continue
      }
      if (!isValidUnit(offset, size)) {
        this.endRel = f.rel
        this.endPos = at
        problems.add({
          file: f.rel,
          offset: at,
          queueOffset,
          reason: `invalid unit (commitLogOffset ${offset}, size ${size}): the queue's data ends here for the store, later units are unreachable`,
        })
        return this.finish()
      }
      counts.units++
      this.seenUnit = true
      this.nextQueueOffset = queueOffset + 1
      this.endRel = f.rel
      this.endPos = at + CQ_STORE_UNIT_SIZE
      this.phy = offset
      this.size = size
      this.tagsCode = tagsCode
      this.queueOffset = queueOffset
      this.rel = f.rel
      this.pos = at
      return true
    }
  }

  private finish(): false {
    this.buf = null
    return false
  }

  /** All-zero unit: the normal end, unless data follows it. */
  private endOfData(index: number, at: number): void {
    this.endRel = this.files[index].rel
    this.endPos = at
    // A zeroed stretch inside the data would hide the units after it. Look a little way past the
    // end and at the start of each later file (the queue count makes a full scan too costly; the
    // commit-log side of the check finds what a queue misses anyway).
    const found = firstNonZero(this.files, index, at, this.ctx.scratch, CQ_TAIL_PROBE, CQ_STORE_UNIT_SIZE)
    if (found === null) return
    const f = this.files[found.index]
    if (found.index === index && found.pos < at + CQ_STORE_UNIT_SIZE) {
      // The end unit itself is no longer zero: a unit appended while we read (a live store).
      this.ctx.counts.appended++
      return
    }
    const unitAt = found.pos - (found.pos % CQ_STORE_UNIT_SIZE)
    this.ctx.problems.add({
      file: f.rel,
      offset: unitAt,
      queueOffset: queueOffsetAt(f.start + unitAt),
      reason: `non-zero bytes after the end of the queue's data (an all-zero unit at ${this.files[index].rel} position ${at}): units there are unreachable`,
    })
  }

  expired(): void {
    this.ctx.counts.expired++
  }

  private problem(reason: string): void {
    this.ctx.problems.add({ file: this.rel, offset: this.pos, phyOffset: this.phy, queueOffset: this.queueOffset, reason })
  }

  miss(reason: string): void {
    this.problem(`points at commit-log offset ${this.phy}, ${reason}`)
  }

  match(req: DispatchRequest): void {
    const why: string[] = []
    if (req.size !== this.size) why.push(`the unit says ${this.size} bytes, the record at ${this.phy} is ${req.size}`)
    if (req.topic !== this.topic || req.queueId !== this.queueId) {
      why.push(`the record at ${this.phy} belongs to ${req.topic}/${req.queueId}, not ${this.topic}/${this.queueId}`)
    } else if (req.queueOffset !== this.queueOffset) {
      why.push(`the record at ${this.phy} has queue offset ${req.queueOffset}, the unit is at queue offset ${this.queueOffset}`)
    }
    if (!isQueuedRecord(req.sysFlag)) {
      why.push(`the record at ${this.phy} is a prepared or rolled-back transaction message, which is never dispatched`)
    }
    if (isExtAddress(this.tagsCode)) this.ctx.counts.extTags++
    else if (this.tagsCode !== req.tagsCode) why.push(`tags code ${this.tagsCode}, the record's tags give ${req.tagsCode}`)
    if (why.length > 0) this.problem(why.join('; '))
  }
}
