// What a put answers per message: RocketMQ's PutMessageStatus and the record's place in the log.
import { createMsgId, type HostAddress } from './record.js'

export type PutMessageStatus =
  | 'PUT_OK'
  | 'FLUSH_DISK_TIMEOUT'
  | 'SERVICE_NOT_AVAILABLE'
  | 'CREATE_MAPEDFILE_FAILED'
  | 'MESSAGE_ILLEGAL'
  | 'PROPERTIES_SIZE_EXCEEDED'
  | 'OS_PAGECACHE_BUSY'
  | 'UNKNOWN_ERROR'
  /** SYNC_MASTER: appended (and flushed), but no slave acknowledged it within syncFlushTimeout. */
  | 'FLUSH_SLAVE_TIMEOUT'
  /** SYNC_MASTER: appended (and flushed), but no slave is connected or the best is too far behind. */
  | 'SLAVE_NOT_AVAILABLE'

/**
 * The outcome of one put. `msgId` is computed on first access (it is a 32-character string).
 * A put that failed says why in `reason` (which check refused the message, or what the store
 * could not do); it is undefined for PUT_OK.
 */
export class PutMessageResult {
  readonly status: PutMessageStatus
  readonly reason: string | undefined
  readonly wroteOffset: number
  readonly wroteBytes: number
  readonly queueOffset: number
  readonly storeTimestamp: number
  private readonly storeHost: HostAddress | null
  private id: string | null = null

  constructor(
    status: PutMessageStatus,
    wroteOffset = -1,
    wroteBytes = 0,
    queueOffset = -1,
    storeTimestamp = 0,
    storeHost: HostAddress | null = null,
    reason?: string,
  ) {
    this.status = status
    this.reason = reason
    this.wroteOffset = wroteOffset
    this.wroteBytes = wroteBytes
    this.queueOffset = queueOffset
    this.storeTimestamp = storeTimestamp
    this.storeHost = storeHost
  }

  get msgId(): string {
    if (this.id === null) this.id = this.storeHost === null ? '' : createMsgId(this.storeHost, this.wroteOffset)
    return this.id
  }

  /** True when the message was appended (even if a flush or slave wait then failed). */
  isOk(): boolean {
    const status = this.status
    return status === 'PUT_OK' || status === 'FLUSH_DISK_TIMEOUT' || status === 'FLUSH_SLAVE_TIMEOUT' || status === 'SLAVE_NOT_AVAILABLE'
  }

  /** A failed put: no offsets, a status and why. */
  static failed(status: PutMessageStatus, reason: string): PutMessageResult {
    return new PutMessageResult(status, -1, 0, -1, 0, null, reason)
  }

  toJSON(): Record<string, unknown> {
    return {
      status: this.status,
      ...(this.reason === undefined ? {} : { reason: this.reason }),
      wroteOffset: this.wroteOffset,
      wroteBytes: this.wroteBytes,
      queueOffset: this.queueOffset,
      msgId: this.msgId,
      storeTimestamp: this.storeTimestamp,
    }
  }
}
