// The checkpoint for verify: present, 4096 bytes, and its timestamps as the store decodes them.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { join } from 'node:path'

import { CHECKPOINT_FILE_SIZE, CHECKPOINT_TIMESTAMPS_SIZE, decodeCheckpointTimestamps } from '../../store/store-checkpoint.js'
import { CHECKPOINT_FILE, CONFIG_DIR, StorePaths, STORE_SIZES_FILE } from '../../store/store-paths.js'
import { checkStoreSizesRecord } from '../../store/store-sizes.js'
import { errorCode, readFully } from './files.js'
import { Problems, type CheckpointReport } from './report.js'

export function checkCheckpoint(
  dir: string,
  maxProblems: number,
  indexDims: { maxHashSlotNum?: number; maxIndexNum?: number } = {},
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
      const head = Buffer.alloc(CHECKPOINT_TIMESTAMPS_SIZE)
      readFully(fd, head, 0, CHECKPOINT_TIMESTAMPS_SIZE, 0)
      report.present = true
      report.size = size
      Object.assign(report, decodeCheckpointTimestamps(head))
      if (size !== CHECKPOINT_FILE_SIZE) {
        problems.add({ file: CHECKPOINT_FILE, offset: 0, reason: `wrong size: ${size} bytes, a checkpoint is ${CHECKPOINT_FILE_SIZE}` })
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
