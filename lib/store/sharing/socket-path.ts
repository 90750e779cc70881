// The address a UNIX domain socket is bound or connected by. sun_path holds 108 bytes on Linux and
// 104 on macOS, the terminating NUL included; a store deep in the file system can exceed that. The
// path relative to the working directory then often fits: both sides use whichever form is shorter.
import { Buffer } from 'node:buffer'
import { relative } from 'node:path'

import { MQStoreError } from '../../errors.js'

/** The longest socket path the system takes, without the NUL. */
export const SUN_PATH_MAX_BYTES = process.platform === 'linux' ? 107 : 103

/**
 * The shorter of `socketPath` (absolute) and its form relative to the working directory; a
 * MQStoreError INVALID_OPTION naming both lengths when neither fits. `what` names the caller.
 */
export function socketAddress(socketPath: string, what: string): string {
  const fromHere = relative(process.cwd(), socketPath)
  const relativeForm = fromHere.startsWith('/') ? fromHere : `./${fromHere}`
  const shorter = Buffer.byteLength(relativeForm) < Buffer.byteLength(socketPath) ? relativeForm : socketPath
  if (Buffer.byteLength(shorter) <= SUN_PATH_MAX_BYTES) return shorter
  throw new MQStoreError(
    'INVALID_OPTION',
    `${what}: the store's socket path ${socketPath} is ${Buffer.byteLength(socketPath)} bytes (${Buffer.byteLength(relativeForm)} from the ` +
      `working directory); a UNIX domain socket path holds at most ${SUN_PATH_MAX_BYTES}. Move the store to a shorter path, ` +
      'or run from a directory near it',
  )
}
