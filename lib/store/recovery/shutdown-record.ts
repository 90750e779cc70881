// Whether the shutdown record of the last clean close still describes the store. It vouches for
// the commit log's end only as long as nobody else wrote: a RocketMQ broker given the directory
// after mqstore closed appends records and rewrites the checkpoint's timestamps (bytes 0..23) but
// leaves mqstore's record (bytes 64..) alone. Trusting the record then would truncate the broker's
// messages, so open falls back to RocketMQ's own recovery when the store disagrees with it.
import type { CommitLog } from '../commitlog/commit-log.js'
import type { CheckpointTimestamps, StoredShutdownRecord } from '../store-checkpoint.js'

/** Why the record cannot be trusted, or null when the checkpoint and the log agree with it. */
export function shutdownRecordDisagreement(
  record: StoredShutdownRecord,
  checkpointNow: CheckpointTimestamps,
  commitLog: Pick<CommitLog, 'recordFollows'>,
): string | null {
  const timestamps = checkpointDisagreement(record, checkpointNow)
  if (timestamps !== null) return timestamps
  if (commitLog.recordFollows(record.endOffset)) {
    return `a record follows the commit-log end of the last clean close (${record.endOffset}): another writer appended since`
  }
  return null
}

/**
 * Why the checkpoint's timestamps (bytes 0..23, which no CRC covers) are not the ones the record
 * saw at the last clean close, or null. Open and verify read the same rule.
 */
export function checkpointDisagreement(record: StoredShutdownRecord, checkpointNow: CheckpointTimestamps): string | null {
  const then = record.checkpointAtClose
  for (const field of ['physicMsgTimestamp', 'logicsMsgTimestamp', 'indexMsgTimestamp'] as const) {
    if (checkpointNow[field] !== then[field]) {
      return `the checkpoint's ${field} is ${checkpointNow[field]}, not the ${then[field]} of the last clean close: another writer (a RocketMQ broker?) used the store since`
    }
  }
  return null
}
