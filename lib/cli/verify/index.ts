// `mqstore verify <dir>`: checks a store directory without changing it.
//
// Nothing is locked, created, written or deleted: every file is opened read-only and read with
// plain positioned reads in bounded chunks, so it is safe to run against a store another process
// has open (what it reports about the live tail of such a store may then be out of date).
//
// Every layout, formula and rule comes from the store's own modules (record codec and recovery
// scan, consume-queue unit codec, index layout and key rule, checkpoint decoders, segment names),
// so verify and open cannot disagree about what the bytes mean.
//
// What is checked:
//   commit log      20-digit names, one file size, no gaps; every record valid up to the end of the
//                   data, walked and stopped exactly as recovery's scan does (the record that stops
//                   it is classified torn or corrupt by recovery's classifier), a blank record
//                   closing each full file, and no records hidden after the end of the data
//   consume queues  units point at the start of a valid record of their topic and queue id, with
//                   the record's size, queue offset and tags code; queue files contiguous; no queue
//                   ends before the last of its records (after a clean shutdown)
//   index           file dimensions; entries point at a record one of whose keys has the entry's
//                   hash; hash chains only link to older entries of the same slot
//   checkpoint      present, 4096 bytes (reported); after a clean shutdown, timestamps equal to
//                   the ones its shutdown record saw (else open distrusts it); abort file (reported)
//   not examined    the other files of the store root (lock, queueends, config/, writer.sock, and
//                   arrivals, whose one byte only wakes readers): none holds data a read depends on
//
// Files: verify-store.ts (the pass), commit-log-walk.ts, pointer-streams.ts, queue-stream.ts,
// index-check.ts, checkpoint-check.ts, record-reader.ts, files.ts, report.ts, format.ts, command.ts.
export { verifyStore } from './verify-store.js'
export { formatVerifyReport } from './format.js'
export { runVerify, VERIFY_USAGE } from './command.js'
export {
  NotAStoreError,
  type CheckpointReport,
  type CommitLogReport,
  type ConsumeQueueReport,
  type IndexFileReport,
  type IndexReport,
  type VerifyOptions,
  type VerifyProblem,
  type VerifyReport,
} from './report.js'
