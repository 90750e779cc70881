// `mqstore verify <dir>`: arguments, output and exit codes.
import { indexFileSize } from '../../store/index/index-layout.js'
import { formatVerifyReport } from './format.js'
import { NotAStoreError, type VerifyOptions, type VerifyReport } from './report.js'
import { verifyStore } from './verify-store.js'

export const VERIFY_USAGE = `usage: mqstore verify <dir> [--json] [--max-hash-slot-num N --max-index-num N]

Checks a store directory without changing it (safe while another process has it open).
  --json                 print the report as JSON
  --max-hash-slot-num N  the store's index dimensions (both or neither); without them the
  --max-index-num N      embedded (1000000/4000000) and RocketMQ (5000000/20000000) sizes are tried
Exit code: 0 clean, 1 problems found, 2 usage error or not a store.
`

interface Output {
  write(text: string): unknown
  isTTY?: boolean
}

class UsageError extends Error {}

function parseArgs(args: readonly string[]): { dir: string; json: boolean; options: VerifyOptions } | 'help' {
  let dir: string | undefined
  let json = false
  const options: VerifyOptions = {}
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === '-h' || arg === '--help') return 'help'
    if (arg === '--json') {
      json = true
      continue
    }
    const m = /^--(max-hash-slot-num|max-index-num)(?:=(.*))?$/.exec(arg)
    if (m !== null) {
      const text = m[2] ?? args[++i]
      const value = Number(text)
      if (text === undefined || text === '' || !Number.isSafeInteger(value) || value < (m[1] === 'max-index-num' ? 2 : 1)) {
        throw new UsageError(`--${m[1]} needs a positive integer`)
      }
      if (m[1] === 'max-hash-slot-num') options.maxHashSlotNum = value
      else options.maxIndexNum = value
      continue
    }
    if (arg.startsWith('-') && arg !== '-') throw new UsageError(`unknown option ${arg}`)
    if (dir !== undefined) throw new UsageError('only one store directory may be given')
    dir = arg
  }
  if (dir === undefined) throw new UsageError('the store directory is missing')
  if ((options.maxHashSlotNum === undefined) !== (options.maxIndexNum === undefined)) {
    throw new UsageError('give both --max-hash-slot-num and --max-index-num, or neither')
  }
  if (options.maxHashSlotNum !== undefined) {
    try {
      indexFileSize(options.maxHashSlotNum, options.maxIndexNum!)
    } catch (error) {
      throw new UsageError((error as Error).message)
    }
  }
  return { dir, json, options }
}

/** `mqstore verify ...`: returns the exit code. */
export async function runVerify(args: readonly string[], out: Output = process.stdout, err: Output = process.stderr): Promise<number> {
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs(args)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    err.write(`mqstore verify: ${error.message}\n${VERIFY_USAGE}`)
    return 2
  }
  if (parsed === 'help') {
    out.write(VERIFY_USAGE)
    return 0
  }
  const { dir, json, options } = parsed
  if (!json && err.isTTY === true) {
    options.onProgress = (done, total) => {
      if (total > 0) err.write(`\rverifying: ${Math.floor((done / total) * 100)}%`)
    }
  }
  let report: VerifyReport
  try {
    report = await verifyStore(dir, options)
  } catch (error) {
    if (!(error instanceof NotAStoreError)) throw error
    err.write(`mqstore verify: ${error.message}\n`)
    return 2
  } finally {
    if (options.onProgress !== undefined) err.write('\r\x1b[K')
  }
  out.write(json ? `${JSON.stringify(report, null, 2)}\n` : formatVerifyReport(report))
  return report.ok ? 0 : 1
}
