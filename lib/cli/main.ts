#!/usr/bin/env node
// The `mqstore` command: a dispatch table of commands, each in its own module, all run by the frame
// in frame.ts (arguments, --help, --json, errors, exit codes). To add a command, write a module
// exporting a `Command` and add it to COMMANDS.
import { realpathSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

import { benchCommand } from './bench.js'
import { runClean } from './clean.js'
import { runCompact } from './compact.js'
import { demoCommand } from './demo.js'
import { EXIT, EXIT_CODES_TEXT, runCommand, type Command, type Output } from './frame.js'
import { getCommand } from './get.js'
import { inspectCommand } from './inspect.js'
import { statsCommand } from './stats.js'
import { tailCommand } from './tail.js'
import { runVerify } from './verify/index.js'

const verifyCommand: Command = {
  name: 'verify',
  summary: 'check every record, queue unit and index entry without changing anything (read-only)',
  synopsis: 'verify <dir> [--json]',
  description: '',
  passthrough: (args, out, err) => runVerify(args, out, err),
}

const cleanCommand: Command = {
  name: 'clean',
  summary: 'run one retention pass, or show what it would delete and why (takes the lock)',
  synopsis: 'clean <dir> [--dry-run] [--json] [--manual]',
  description: '',
  passthrough: (args, out, err) => runClean(args, out, err),
}

const compactCommand: Command = {
  name: 'compact',
  summary: 'run a compaction pass now over the compacted topics of a closed store (takes the lock)',
  synopsis: 'compact <dir> [--topic T] [--json] [--max-hash-slot-num N --max-index-num N]',
  description: `
Runs one compaction pass over the store's compacted queues (of topic T only) and prints what it
did: queues cleaned, bytes read and written, records kept and dropped, duration; a progress bar on
a TTY. File sizes are read from the store's files. Exit code 1 when a queue failed.`,
  passthrough: (args, out, err) => runCompact(args, out, err),
}

export const COMMANDS: Command[] = [
  inspectCommand,
  tailCommand,
  getCommand,
  statsCommand,
  verifyCommand,
  cleanCommand,
  compactCommand,
  benchCommand,
  demoCommand,
]

export function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length))
  return `usage: mqstore <command> [options]

An embedded RocketMQ-format message store; these commands look at and exercise a store directory.

commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n')}

Every command takes --help, --json (JSON on stdout that parses) and --debug (stack traces).
Read-only commands take no lock: they work on a store another process has open.

${EXIT_CODES_TEXT}`
}

export async function main(argv: string[], out: Output = process.stdout, err: Output = process.stderr): Promise<number> {
  const [name, ...args] = argv
  if (name === undefined || name === '-h' || name === '--help' || name === 'help') {
    out.write(usage())
    return name === undefined ? EXIT.USAGE : EXIT.OK
  }
  const command = COMMANDS.find((c) => c.name === name)
  if (command === undefined) {
    err.write(`mqstore: unknown command '${name}' (commands: ${COMMANDS.map((c) => c.name).join(', ')}; see mqstore --help)\n`)
    return EXIT.USAGE
  }
  const abort = new AbortController()
  const stop = () => abort.abort()
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
  try {
    return await runCommand(command, args, { out, err, signal: abort.signal })
  } finally {
    process.off('SIGINT', stop)
    process.off('SIGTERM', stop)
  }
}

const invokedDirectly = process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)
if (invokedDirectly) {
  // A reader that goes away (`mqstore tail ... | head`) ends the output, not the command with a stack.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(EXIT.OK)
    throw error
  })
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code
  })
}
