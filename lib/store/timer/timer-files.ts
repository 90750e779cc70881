// What `mqstore verify` says about the timer's files, read without opening the store: the wheel's
// length, the checkpoint, and the timer log's units up to its first damaged one. Notes, not
// problems: open rebuilds each of them (a repair), at the cost of deliveries repeated.
import * as fs from 'node:fs'
import { join } from 'node:path'

import { loadTimerCheckpoint } from './timer-checkpoint.js'
import { TIMER_LOG_UNIT_SIZE, unitKind } from './timer-log.js'
import { TIMER_CHECKPOINT_FILE, TIMER_LOG_DIR, TIMER_WHEEL_FILE } from './timer-service.js'
import { TIMER_WHEEL_FILE_SIZE } from './timer-wheel.js'

export function timerFileNotes(root: string, configDir: string): string[] {
  const notes: string[] = []
  const logDir = join(root, TIMER_LOG_DIR)
  const names = fs.existsSync(logDir)
    ? fs
        .readdirSync(logDir)
        .filter((name) => /^\d{20}$/.test(name))
        .sort()
    : []
  const wheel = fs.statSync(join(root, TIMER_WHEEL_FILE), { throwIfNoEntry: false })
  if (names.length === 0 && wheel === undefined) return notes
  if (wheel === undefined) notes.push(`${TIMER_WHEEL_FILE} is missing; open rebuilds it from ${TIMER_LOG_DIR}/`)
  else if (wheel.size !== TIMER_WHEEL_FILE_SIZE)
    notes.push(`${TIMER_WHEEL_FILE} is ${wheel.size} bytes, not ${TIMER_WHEEL_FILE_SIZE}; open rebuilds it from ${TIMER_LOG_DIR}/`)
  const checkpoint = loadTimerCheckpoint(join(configDir, TIMER_CHECKPOINT_FILE))
  if (checkpoint === null)
    notes.push(`config/${TIMER_CHECKPOINT_FILE} is missing; open rebuilds the wheel and delivers the last 14 days' slots again`)
  else if ('damage' in checkpoint)
    notes.push(`config/${TIMER_CHECKPOINT_FILE}: ${checkpoint.damage}; open rebuilds the wheel and delivers the last 14 days' slots again`)
  for (const [i, name] of names.entries()) {
    const bytes = fs.readFileSync(join(logDir, name))
    let at = 0
    while (at < bytes.length && unitKind(bytes, at) === 'unit') at += TIMER_LOG_UNIT_SIZE
    if (at < bytes.length && unitKind(bytes, at) === 'blank') continue
    const rest = bytes.subarray(at)
    if (i < names.length - 1 || rest.some((byte) => byte !== 0)) {
      notes.push(
        `${TIMER_LOG_DIR}/${name}: a damaged unit at ${at}; open cuts the log there and enqueues the timer topic again from the last good unit`,
      )
      break
    }
  }
  return notes
}
