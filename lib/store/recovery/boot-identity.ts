// Whether the run that left the abort file behind ran since the machine's last boot.
//
// A process crash (SIGKILL, an OOM kill, an abort) keeps the page cache: every byte the dead
// process wrote to its files is there, in the order it wrote it, synced or not. Only a power cut
// or a kernel crash, after which the machine boots again, loses unsynced writes. So the abort file
// carries the identity of the boot that wrote it (Linux's boot_id, a random id drawn at each
// boot), and an open after a crash of the same boot may trust what the dead process dispatched:
// its consume queues up to their ends, and the index file it was writing (see store-recovery.ts).
// Where no boot id can be read, the file stays empty and every crash counts as a possible power
// cut. RocketMQ only looks at whether the abort file exists, never at what it holds.
import * as fs from 'node:fs'

const BOOT_ID_PATH = '/proc/sys/kernel/random/boot_id'
const PREFIX = 'boot_id='

/** Read once: no process outlives the boot it started in (undefined until the first call). */
let bootId: string | null | undefined

/** This boot's id, or null where the system does not tell it. */
export function currentBootId(): string | null {
  if (bootId === undefined) bootId = readBootId()
  return bootId
}

function readBootId(): string | null {
  try {
    const id = fs.readFileSync(BOOT_ID_PATH, 'utf8').trim()
    return /^[0-9a-f-]{16,64}$/.test(id) ? id : null
  } catch {
    return null
  }
}

/** What a store writes into its abort file when it opens. */
export function abortFileContent(bootId: string | null = currentBootId()): string {
  return bootId === null ? '' : `${PREFIX}${bootId}\n`
}

/**
 * True when the abort file at `path` was written during this boot: the last run crashed without
 * the machine restarting, so its writes are all in the page cache. False when the file is absent,
 * empty, unreadable or from another boot.
 */
export function crashedInThisBoot(path: string, bootId: string | null = currentBootId()): boolean {
  if (bootId === null) return false
  let text: string
  try {
    text = fs.readFileSync(path, 'utf8')
  } catch {
    return false
  }
  return text === abortFileContent(bootId)
}
