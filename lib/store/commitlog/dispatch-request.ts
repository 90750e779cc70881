// What dispatch takes from a stored record (checkRecord in record.ts decides and fills it in): a
// plain object per record for most callers, or one CheckedRecord filled in again and again by a scan.
import { Buffer } from 'node:buffer'
import { readText } from './record-text.js'

export type CheckStatus = 'OK' | 'BLANK' | 'BAD' | 'LENGTH_MISMATCH'

export interface DispatchRequest {
  status: CheckStatus
  /** TOTALSIZE for OK and LENGTH_MISMATCH, 0 for BLANK, -1 for BAD. */
  size: number
  /** For BAD and LENGTH_MISMATCH: what failed. */
  reason?: string
  // The fields below are meaningful for OK only (zero / empty otherwise).
  topic: string
  queueId: number
  queueOffset: number
  commitLogOffset: number
  sysFlag: number
  bornTimestamp: number
  storeTimestamp: number
  preparedTransactionOffset: number
  tagsCode: number
  keys: string | undefined
  uniqKey: string | undefined
  bodyCRC: number
}

/** A dispatch request with every field empty, for a writer that fills one in again and again. */
export function blankDispatchRequest(): DispatchRequest {
  return failed('OK', 0, undefined)
}

export function failed(status: CheckStatus, size: number, reason: string | undefined): DispatchRequest {
  return {
    status,
    size,
    reason,
    topic: '',
    queueId: 0,
    queueOffset: 0,
    commitLogOffset: 0,
    sysFlag: 0,
    bornTimestamp: 0,
    storeTimestamp: 0,
    preparedTransactionOffset: 0,
    tagsCode: 0,
    keys: undefined,
    uniqKey: undefined,
    bodyCRC: 0,
  }
}

const NO_BYTES = Buffer.alloc(0)

/**
 * A DispatchRequest that checkRecordInto fills in again for each record (a recovery scan keeps one):
 * no object and no key string per record. KEYS and UNIQ_KEY stay bytes of `bytes`, the buffer
 * checked, decoded only when read; the index hashes them from the bytes (index-keys.ts). Valid
 * until the next check into it, and only while `bytes` is.
 */
export class CheckedRecord implements DispatchRequest {
  status: CheckStatus = 'OK'
  size = 0
  reason: string | undefined = undefined
  topic = ''
  /** The Java hash of `topic`. */
  topicHash = 0
  queueId = 0
  queueOffset = 0
  commitLogOffset = 0
  sysFlag = 0
  bornTimestamp = 0
  storeTimestamp = 0
  preparedTransactionOffset = 0
  tagsCode = 0
  bodyCRC = 0
  bytes: Buffer = NO_BYTES
  /** KEYS at bytes[keysAt, keysEnd) (-1: none), plain ASCII when keysAscii; UNIQ_KEY likewise. */
  keysAt = -1
  keysEnd = 0
  keysAscii = true
  uniqAt = -1
  uniqEnd = 0
  uniqAscii = true

  get keys(): string | undefined {
    return this.keysAt < 0 ? undefined : readText(this.bytes, this.keysAt, this.keysEnd, this.keysAscii)
  }

  get uniqKey(): string | undefined {
    return this.uniqAt < 0 ? undefined : readText(this.bytes, this.uniqAt, this.uniqEnd, this.uniqAscii)
  }

  /** Drops the buffer checked (a mapping stays reachable through it otherwise). */
  release(): void {
    this.bytes = NO_BYTES
  }
}

/** Marks `out` failed, and returns false (its other fields are left as they were: only status, size and reason count). */
export function fail(out: CheckedRecord, status: CheckStatus, size: number, reason: string | undefined): false {
  out.status = status
  out.size = size
  out.reason = reason
  return false
}
