// Operational and data errors carry a stable upper-case `code`. Misuse of the API (wrong types,
// out-of-range arguments) throws TypeError / RangeError instead: that is a bug, not a case to handle.

/** Every code an MQStoreError may carry, with what it means. */
export const ERROR_CODES = [
  'STORE_CLOSED', // an operation on a closed store or file
  'LOCKED', // another process holds the store directory
  'INVALID_OPTION', // an unknown or invalid option
  'BAD_FILE_SIZE', // a segment whose length differs from the configured file size
  'BAD_FILE_NAME', // a segment whose name is not its 20-digit start offset
  'NON_CONTIGUOUS', // a gap or overlap between consecutive segments
  'CORRUPTION', // a record or file failed its checks
  'NO_SPACE', // the disk is full (preallocation failed)
  'TOO_MANY_OPEN_FILES', // the process is out of file descriptors (EMFILE / ENFILE); retried later
  'IO_ERROR', // any other system call failure
  'READ_ONLY', // a writing call on a store opened with { readOnly: true }
] as const

export type ErrorCode = (typeof ERROR_CODES)[number]

export class MQStoreError extends Error {
  readonly code: ErrorCode

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'MQStoreError'
    this.code = code
  }
}

/** Wraps a system error from fs or the addon, keeping it as the cause. */
export function ioError(message: string, cause: unknown): MQStoreError {
  const sys = cause as { code?: string } | undefined
  const code: ErrorCode =
    sys?.code === 'ENOSPC' || sys?.code === 'EDQUOT'
      ? 'NO_SPACE'
      : sys?.code === 'EMFILE' || sys?.code === 'ENFILE' || sys?.code === 'TOO_MANY_OPEN_FILES'
        ? 'TOO_MANY_OPEN_FILES'
        : 'IO_ERROR'
  const detail = cause instanceof Error ? `: ${cause.message}` : ''
  return new MQStoreError(code, `${message}${detail}`, { cause })
}
