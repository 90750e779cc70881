// The commit log's recovery scan: walk records from the start of a file while they are valid, and
// when one is not, say whether it is a torn write or corruption. Pure decisions over bytes: the
// store's recovery reads the bytes from its mappings, `mqstore verify` from plain file reads, and
// both decide through the functions here, so what verify predicts is what open does.
//
// One step of the walk, at position `pos` of a file (see scanStep):
//   valid record whose PHYSICALOFFSET names this position   -> record, go on after it
//   valid record that names another position               -> bad: its header is damaged where the
//                                                              body CRC does not look, or it is not
//                                                              where it was written
//   blank record (end-of-file magic)                        -> blank, go on at the next file
//   8 zero bytes (or only zeros up to the end of the file)  -> end of data
//   anything else                                           -> bad
// A bad record is torn (classifyDamage) when nothing but zeros follows its claimed extent, to the
// end of its file and through every later file, and that extent hides no valid record: the tail
// of an append a crash cut short. Anything else is corruption; the corruption policy decides.
import { Buffer } from 'node:buffer'
import {
  CheckedRecord,
  checkRecord,
  checkRecordInto,
  DEFAULT_DELAY_TABLE,
  MESSAGE_MAGIC_CODE,
  MIN_RECORD_LENGTH,
  requestOf,
  type DispatchRequest,
} from './record.js'
import { dataViewOf, type DataViewCache } from '../bytes.js'
import { CrcPrefetch } from './crc-prefetch.js'
import { ScanWindow, type WindowSource } from './scan-window.js'

/** Where a recovery scan met a record that failed its checks. */
export interface RecoveryDamage {
  /** torn: only zeros follow (an append cut short); corrupt: data follows the bad record. */
  kind: 'torn' | 'corrupt'
  /** Commit-log offset of the bad record, and the bytes it claims (at least 8). */
  offset: number
  length: number
  reason: string
}

/**
 * Called for every valid record a recovery walks over (abnormal recovery re-dispatches them). The
 * request is one object the scan fills in again for each record: valid during the call only.
 */
export type RecoveredRecordHandler = (request: DispatchRequest) => void

/** Progress of a recovery scan: bytes checked so far, of the bytes it may have to check. */
export type RecoveryProgress = (scannedBytes: number, totalBytes: number) => void

/** What the store learns from a recovery scan. */
export interface RecoveryOutcome {
  /** Where valid data ends: the commit log is truncated here. */
  processOffset: number
  /** The record that stopped the scan before the end of the data, if one did. */
  damage: RecoveryDamage | null
  /** The same as damage (kept for stats consumers). */
  stoppedAt: RecoveryDamage | null
  /** Bytes scanned (0 for a clean open from the shutdown record). */
  scannedBytes: number
  /** Offset of the last valid record, -1 when the log is empty. */
  lastRecordOffset: number
}

/**
 * The commit-log files as the scan sees them. `read` returns bytes [from, to) of file `index`,
 * fewer at the end of what the file holds (the store hands out views of its mappings; verify reads).
 */
export interface ScanSource extends WindowSource {
  readonly fileCount: number
  /** The configured size of every file. */
  readonly fileSize: number
  fileStart(index: number): number
}

export type ScanStep = { kind: 'record'; request: DispatchRequest } | { kind: 'blank' } | { kind: 'end' } | { kind: 'bad'; reason: string }

/** What scanStepInto found at a position (the record itself, or why it is bad, is in its `out`). */
export const STEP_RECORD = 0
export const STEP_BLANK = 1
export const STEP_END = 2
export const STEP_BAD = 3

/**
 * Decides what is at buf[pos], where buf holds file bytes from position `bufStart` of a file that
 * starts at commit-log offset `fileStart`, up to at least the end of the record there (or the end
 * of the file). `limit` is the end of the file in buf's coordinates.
 */
export function scanStep(
  buf: Buffer,
  pos: number,
  limit: number,
  atOffset: number,
  checkCRC: boolean,
  views?: DataViewCache,
  bodyCrc = -1,
): ScanStep {
  const checked = STEP_SCRATCH
  const kind = scanStepInto(buf, pos, limit, atOffset, checkCRC, views, bodyCrc, checked)
  const step: ScanStep =
    kind === STEP_RECORD
      ? { kind: 'record', request: requestOf(checked) }
      : kind === STEP_BLANK
        ? { kind: 'blank' }
        : kind === STEP_END
          ? { kind: 'end' }
          : { kind: 'bad', reason: checked.reason ?? checked.status }
  checked.release()
  return step
}

const STEP_SCRATCH = new CheckedRecord()

/**
 * scanStep into `out`, for a scan that keeps one CheckedRecord: STEP_RECORD (the record is in
 * `out`), STEP_BLANK, STEP_END, or STEP_BAD (the reason is `out.reason ?? out.status`).
 */
export function scanStepInto(
  buf: Buffer,
  pos: number,
  limit: number,
  atOffset: number,
  checkCRC: boolean,
  views: DataViewCache | undefined,
  bodyCrc: number,
  out: CheckedRecord,
): number {
  checkRecordInto(buf, pos, limit, checkCRC, DEFAULT_DELAY_TABLE, views, bodyCrc, out)
  if (out.status === 'OK') {
    if (out.commitLogOffset !== atOffset) {
      out.reason = `header: physical offset ${out.commitLogOffset} at position ${atOffset}`
      return STEP_BAD
    }
    if (out.size > 0) return STEP_RECORD
  }
  if (out.status === 'BLANK') return STEP_BLANK
  // Zeros after the last record are the normal end of the log; anything else is damage.
  if (isZero(buf, pos, Math.min(limit, pos + 8))) return STEP_END
  return STEP_BAD
}

const ZEROS = Buffer.alloc(64 * 1024)
const MAGIC_BYTES = Buffer.alloc(4)
MAGIC_BYTES.writeInt32BE(MESSAGE_MAGIC_CODE)
/** Bytes read at a time when looking through a file for zeros or records. */
const READ_CHUNK = 4 * 1024 * 1024

/** True when buf[from, to) holds only zeros (compared natively, a chunk at a time). */
export function isZero(buf: Buffer, from: number, to: number): boolean {
  const end = Math.min(to, buf.length)
  for (let at = from; at < end; at += ZEROS.length) {
    const n = Math.min(ZEROS.length, end - at)
    if (buf.compare(ZEROS, 0, n, at, at + n) !== 0) return false
  }
  return true
}

/** The first non-zero position in [from, to) of file `index`, or -1 when there is none. */
export function firstNonZeroIn(src: ScanSource, index: number, from: number, to: number): number {
  for (let at = from; at < to; at += READ_CHUNK) {
    const chunk = src.read(index, at, Math.min(to, at + READ_CHUNK))
    if (chunk.length === 0) return -1
    if (!isZero(chunk, 0, chunk.length)) {
      for (let k = 0; k < chunk.length; k++) if (chunk[k] !== 0) return at + k
    }
  }
  return -1
}

/**
 * True when a valid record (CRC checked) starts in file `index` with its magic code in [from, to).
 * The record itself may run past `to`.
 */
export function hidesRecord(src: ScanSource, index: number, from: number, to: number): boolean {
  for (let at = from; at < to; at += READ_CHUNK) {
    const stop = Math.min(to, at + READ_CHUNK)
    // Three more bytes so that a magic code across the chunk boundary is seen.
    const chunk = src.read(index, at, stop + 3)
    for (let k = chunk.indexOf(MAGIC_BYTES); k >= 0 && at + k < stop; k = chunk.indexOf(MAGIC_BYTES, k + 1)) {
      const start = at + k - 4
      if (start < 0) continue
      const head = src.read(index, start, start + 4)
      const total = head.length === 4 ? head.readInt32BE(0) : 0
      if (total < MIN_RECORD_LENGTH) continue
      const record = src.read(index, start, start + total)
      if (checkRecord(record, 0, record.length, true).status === 'OK') return true
    }
    if (chunk.length < stop - at) break
  }
  return false
}

/**
 * Torn or corrupt, for a bad record at position `pos` of file `index` (see the file comment). Its
 * claimed extent is TOTALSIZE when that fits in the file, else the 8-byte header.
 */
export function classifyDamage(src: ScanSource, index: number, pos: number, reason: string): RecoveryDamage {
  const fileSize = src.fileSize
  const head = src.read(index, pos, pos + 4)
  const claimed = head.length === 4 ? head.readInt32BE(0) : 0
  const claimedEnd = claimed >= 8 && pos + claimed <= fileSize ? pos + claimed : pos + 8
  let torn = firstNonZeroIn(src, index, claimedEnd, fileSize) < 0 && !hidesRecord(src, index, pos + 8, claimedEnd)
  for (let i = index + 1; torn && i < src.fileCount; i++) torn = firstNonZeroIn(src, i, 0, fileSize) < 0
  return { kind: torn ? 'torn' : 'corrupt', offset: src.fileStart(index) + pos, length: claimedEnd - pos, reason }
}

/** Report progress about every this many bytes. */
const PROGRESS_STEP_BYTES = 64 * 1024 * 1024

/** Where a scan starts in the middle of a file: a record boundary, and the record that ends there. */
export interface ScanResume {
  /** Position in the start file (a record starts there, or the file's blank, or the data ends). */
  position: number
  /** Commit-log offset of the record that ends at `position`. */
  lastRecordOffset: number
}

/**
 * Walks records from the start of file `startIndex` (or from `resume`'s position in it) while they
 * are valid, handing each to `onRecord`; stops at the first bad record (classified) or at the end
 * of the data. Nothing is truncated here: the caller applies its corruption policy to the outcome
 * first.
 */
export function scanRecords(
  src: ScanSource,
  startIndex: number,
  checkCRC: boolean,
  onRecord: RecoveredRecordHandler | null,
  onProgress: RecoveryProgress | null,
  views?: DataViewCache,
  resume: ScanResume | null = null,
): RecoveryOutcome {
  const fileSize = src.fileSize
  let pos = resume?.position ?? 0
  const totalBytes = (src.fileCount - startIndex) * fileSize - pos
  let index = startIndex
  const window = new ScanWindow(src)
  let scannedBytes = 0
  let nextReport = PROGRESS_STEP_BYTES
  let lastRecordOffset = resume?.lastRecordOffset ?? -1
  let damage: RecoveryDamage | null = null
  // Body CRCs a chunk of records at a time (one native call each), not one call per record.
  const prefetch = checkCRC ? new CrcPrefetch() : null
  // One request for the whole scan, filled in again for each record.
  const record = new CheckedRecord()
  onProgress?.(0, totalBytes)
  for (;;) {
    const at = src.fileStart(index) + pos
    // The header, then (when it claims more than the window holds) the whole record it claims.
    let rel = window.hold(index, pos, MIN_RECORD_LENGTH)
    let buf = window.bytes
    let dv = dataViewOf(buf, views)
    if (rel + 8 <= buf.length && dv.getInt32(rel + 4) === MESSAGE_MAGIC_CODE) {
      const claimed = dv.getInt32(rel)
      if (claimed >= MIN_RECORD_LENGTH && claimed <= fileSize - pos && rel + claimed > buf.length) {
        rel = window.hold(index, pos, claimed)
        buf = window.bytes
        dv = dataViewOf(buf, views)
      }
    }
    const limit = fileSize - window.start
    const bodyCrc = prefetch === null ? -1 : prefetch.crcAt(buf, rel, limit, dv)
    const step = scanStepInto(buf, rel, limit, at, checkCRC, views, bodyCrc, record)
    if (step === STEP_RECORD) {
      if (onRecord !== null) onRecord(record)
      lastRecordOffset = at
      pos += record.size
      scannedBytes += record.size
      if (scannedBytes >= nextReport) {
        onProgress?.(scannedBytes, totalBytes)
        nextReport = scannedBytes + PROGRESS_STEP_BYTES
      }
      continue
    }
    if (step === STEP_BLANK) {
      scannedBytes += fileSize - pos
      if (index + 1 >= src.fileCount) break
      index += 1
      pos = 0
      continue
    }
    if (step === STEP_BAD) damage = classifyDamage(src, index, pos, record.reason ?? record.status)
    break
  }
  window.release()
  record.release()
  onProgress?.(totalBytes, totalBytes)
  return { processOffset: src.fileStart(index) + pos, damage, stoppedAt: damage, scannedBytes, lastRecordOffset }
}
