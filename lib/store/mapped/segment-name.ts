// Segment files (commit log, consume queue) are named by the offset of their first byte: decimal,
// zero-padded to 20 digits. This is the only place that formats or parses those names.

export const OFFSET_NAME_LENGTH = 20
const OFFSET_NAME = /^\d{20}$/

export function formatOffsetName(offset: number): string {
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new RangeError(`segment offset must be a non-negative safe integer, got ${offset}`)
  }
  return String(offset).padStart(OFFSET_NAME_LENGTH, '0')
}

/** The start offset a segment name encodes, or null when the name is not a segment name. */
export function parseOffsetName(name: string): number | null {
  if (!OFFSET_NAME.test(name)) return null
  const offset = Number(name)
  return Number.isSafeInteger(offset) ? offset : null
}
