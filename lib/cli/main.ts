#!/usr/bin/env node
// The `mqstore` command. Subcommands: demo [dir], verify <dir>, clean <dir>.
import { resolve } from 'node:path'

import { runClean } from './clean.js'
import { runDemo } from './demo.js'
import { runVerify } from './verify.js'

const USAGE = `usage: mqstore <command> [args]

commands:
  demo [dir]   write, read, query and close a store in dir (default ./data)
  verify <dir> [--json] [--max-hash-slot-num N --max-index-num N]
               check a store without changing it; exit 0 clean, 1 problems, 2 not a store
  clean <dir> [--dry-run] [--json] [--manual]
               run one retention pass (or show what it would delete and why); takes the lock
`

async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv
  switch (command) {
    case 'demo':
      await runDemo(resolve(args[0] ?? 'data'))
      return 0
    case 'verify':
      return runVerify(args)
    case 'clean':
      return runClean(args)
    case undefined:
    case '-h':
    case '--help':
      process.stdout.write(USAGE)
      return command === undefined ? 2 : 0
    default:
      process.stderr.write(`mqstore: unknown command '${command}'\n${USAGE}`)
      return 2
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`mqstore: ${(error as Error)?.message ?? String(error)}\n`)
    process.exitCode = 1
  },
)
