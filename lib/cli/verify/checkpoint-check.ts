// The checkpoint for verify: present, 4096 bytes, and its timestamps as the store decodes them.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { join } from 'node:path'

import { checkpointDisagreement } from '../../store/recovery/shutdown-record.js'
import {
  CHECKPOINT_FILE_SIZE,
  CHECKPOINT_TIMESTAMPS_SIZE,
  decodeCheckpointTimestamps,
  decodeShutdownRecord,
} from '../../store/store-checkpoint.js'
import { CHECKPOINT_FILE, CONFIG_DIR, StorePaths, STORE_SIZES_FILE } from '../../store/store-paths.js'
import { checkStoreSizesRecord } from '../../store/store-sizes.js'
import { errorCode, readFully } from './files.js'
import { Problems, type CheckpointReport } from './report.js'

/**
 * `cleanShutdown`: no abort file, so open will read the clean-shutdown record; timestamps that
 * disagree with it make open distrust it and scan the commit log's tail (a repair it reports).
 */
export function checkCheckpoint(
  dir: string,
  maxProblems: number,
  indexDims: { maxHashSlotNum?: number; maxIndexNum?: number } = {},
  cleanShutdown = false,
): CheckpointReport {
  const problems = new Problems(maxProblems)
  const report: CheckpointReport = {
    present: false,
    size: 0,
    physicMsgTimestamp: 0,
    logicsMsgTimestamp: 0,
    indexMsgTimestamp: 0,
    problems: [],
    moreProblems: 0,
  }
  try {
    const fd = fs.openSync(join(dir, CHECKPOINT_FILE), 'r')
    try {
      const size = fs.fstatSync(fd).size
      const whole = size === CHECKPOINT_FILE_SIZE
      const bytes = Buffer.alloc(whole ? CHECKPOINT_FILE_SIZE : CHECKPOINT_TIMESTAMPS_SIZE)
      readFully(fd, bytes, 0, bytes.length, 0)
      report.present = true
      report.size = size
      const timestamps = decodeCheckpointTimestamps(bytes)
      Object.assign(report, timestamps)
      if (!whole) {
        problems.add({ file: CHECKPOINT_FILE, offset: 0, reason: `wrong size: ${size} bytes, a checkpoint is ${CHECKPOINT_FILE_SIZE}` })
      }
      const record = whole && cleanShutdown ? decodeShutdownRecord(bytes) : null
      const why = record === null ? null : checkpointDisagreement(record, timestamps)
      if (why !== null) {
        problems.add({
          file: CHECKPOINT_FILE,
          offset: 0,
          reason: `${why}; the next open will not trust the last clean close's record and will scan the commit log's tail`,
        })
      }
    } finally {
      fs.closeSync(fd)
    }
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw error
  }
  // The sizes record is read by open before anything else: what it would refuse is a problem here.
  const sizes = checkStoreSizesRecord(new StorePaths(dir), indexDims)
  if (sizes !== null) problems.add({ file: `${CONFIG_DIR}/${STORE_SIZES_FILE}`, offset: 0, reason: sizes })
  report.problems = problems.problems
  report.moreProblems = problems.moreProblems
  return report
}
