// config/timercheck: the timer's progress, 4096 bytes of big-endian longs in RocketMQ 5's places:
// 0 lastReadTimeMs (slots before it are delivered), 8 lastTimerLogFlushPos (the timer log and the
// wheel are on disk up to it), 16 lastTimerQueueOffset (the timer topic's records before it are in
// the timer log), 24 masterTimerQueueOffset (the same here: no replicas), then a data version.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'

import { writeFileDurably } from '../mapped/directory.js'
import { readLong, writeLong } from './timer-log.js'

export const TIMER_CHECKPOINT_SIZE = 4096

export interface TimerCheckpoint {
  lastReadTimeMs: number
  lastTimerLogFlushPos: number
  lastTimerQueueOffset: number
}

/** The checkpoint, null when there is none, or a reason it cannot be read (damage). */
export function loadTimerCheckpoint(path: string): TimerCheckpoint | null | { damage: string } {
  let bytes: Buffer
  try {
    bytes = fs.readFileSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    return { damage: (error as Error).message }
  }
  if (bytes.length !== TIMER_CHECKPOINT_SIZE) return { damage: `${bytes.length} bytes, not ${TIMER_CHECKPOINT_SIZE}` }
  const checkpoint = {
    lastReadTimeMs: readLong(bytes, 0),
    lastTimerLogFlushPos: readLong(bytes, 8),
    lastTimerQueueOffset: readLong(bytes, 16),
  }
  if (Object.values(checkpoint).some((value) => value < 0)) return { damage: 'a negative field' }
  return checkpoint
}

export function saveTimerCheckpoint(path: string, checkpoint: TimerCheckpoint, version: number): void {
  const bytes = Buffer.alloc(TIMER_CHECKPOINT_SIZE)
  writeLong(bytes, 0, checkpoint.lastReadTimeMs)
  writeLong(bytes, 8, checkpoint.lastTimerLogFlushPos)
  writeLong(bytes, 16, checkpoint.lastTimerQueueOffset)
  writeLong(bytes, 24, checkpoint.lastTimerQueueOffset)
  writeLong(bytes, 40, Date.now())
  writeLong(bytes, 48, version)
  writeFileDurably(path, bytes)
}
