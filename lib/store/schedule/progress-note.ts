// A progress note (config/delayProgress.json for the schedule service, config/timerProgress.json
// for the timer): the delivery progress as of the last delivery batch, one small JSON object
// written after each batch without a sync, beside the durable progress files (delayOffset.json,
// timercheck) that are saved every few seconds and only for deliveries already on disk.
//
// A process crash keeps the page cache, so the note tells the reopened store how far delivery
// went, and it repeats at most the batch in flight instead of seconds of deliveries. A power cut
// may lose the delivered copies the note counts: the note names the commit-log end (and the
// timer-log end) its deliveries lie below, and it is used only when the recovered logs reach that
// far; else the durable files decide. A torn or unreadable note is ignored the same way.
//
//   {"logEnd":<commit-log offset>, ...the service's own non-negative integer fields}
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { basename } from 'node:path'

import { readTextIfExists } from '../mapped/directory.js'
import type { StoreLog } from '../store-logger.js'

export const DELAY_PROGRESS_FILE = 'delayProgress.json'
export const TIMER_PROGRESS_FILE = 'timerProgress.json'

export type ProgressNote = { logEnd: number } & Record<string, number | Record<string, number>>

/** The note is padded with spaces to a multiple of this, so that the file keeps its length. */
const NOTE_BLOCK = 512

/**
 * Writes the note in place (no sync: see above), in one write at offset 0 and without truncating
 * first: a process killed meanwhile leaves the old note or the new one, never an empty file.
 * Throws what the write throws.
 */
export function writeProgressNote(path: string, note: ProgressNote): void {
  const text = JSON.stringify(note)
  const bytes = Buffer.alloc(Math.ceil((text.length + 1) / NOTE_BLOCK) * NOTE_BLOCK, 0x20)
  bytes.write(text, 0, 'latin1')
  const fd = fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_CREAT)
  try {
    fs.writeSync(fd, bytes, 0, bytes.length, 0)
    // Only ever shortens a note that was longer, after the new one is whole.
    fs.ftruncateSync(fd, bytes.length)
  } finally {
    fs.closeSync(fd)
  }
}

/** Writes notes to `path`; a failed write is logged once until one succeeds (delivery goes on: the durable files still cover it). */
export function noteWriter(path: string, log: StoreLog): (note: ProgressNote) => void {
  let failing = false
  return (note) => {
    try {
      writeProgressNote(path, note)
      failing = false
    } catch (error) {
      if (!failing) log('warn', `cannot write config/${basename(path)}: ${(error as Error).message}`)
      failing = true
    }
  }
}

/**
 * The note, or null when there is none or it cannot be used (torn, not an object, `logEnd` or a
 * `fields` entry not a non-negative integer).
 */
export function readProgressNote(path: string, fields: readonly string[]): ProgressNote | null {
  let parsed: unknown
  try {
    const text = readTextIfExists(path)
    if (text === null) return null
    parsed = JSON.parse(text)
  } catch {
    return null
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return null
  const note = parsed as Record<string, unknown>
  for (const field of ['logEnd', ...fields]) if (!isOffset(note[field])) return null
  return note as ProgressNote
}

export function isOffset(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}
