// The frame every `mqstore` command runs in: argument parsing (util.parseArgs), `--help`,
// `--json`, `--debug`, one-line errors, exit codes and a progress bar that only draws on a TTY.
// A command is a `Command` object; main.ts lists them in its dispatch table.
import { parseArgs } from 'node:util'

import { MQStoreError } from '../errors.js'

/** Exit codes of every command (documented in `mqstore --help` and docs/cli.md). */
export const EXIT = {
  OK: 0,
  /** The command failed at run time (I/O error, damaged data), or verify found problems. */
  FAILURE: 1,
  /** Bad arguments, an unknown command, or a directory that is not a store. */
  USAGE: 2,
  /** The command needs the store's lock and another process has the store open. */
  LOCKED: 3,
  /** Nothing matched (get: no message with that key or offset; tail: no such topic or queue). */
  NOT_FOUND: 4,
} as const

export const EXIT_CODES_TEXT = `exit codes:
  0  success
  1  failure at run time (I/O error, damaged data; verify: problems found)
  2  usage error, unknown command, or not a store directory
  3  the store is open in another process (a command that needs its lock)
  4  nothing found (get; tail of a topic or queue that does not exist)
`

/** An error the frame prints as one line, exiting with `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.FAILURE,
  ) {
    super(message)
    this.name = 'CliError'
  }
}

export class UsageError extends CliError {
  constructor(message: string) {
    super(message, EXIT.USAGE)
    this.name = 'UsageError'
  }
}

/** Where a command writes: process.stdout / process.stderr, or a test's collector. */
export interface Output {
  write(text: string): unknown
  isTTY?: boolean
  columns?: number
}

export interface OptionSpec {
  type: 'string' | 'boolean'
  short?: string
  /** Placeholder of the value in the help text, e.g. 'N'. */
  value?: string
  description: string
}

export type OptionValues = Record<string, string | boolean | undefined>

export interface CommandContext {
  /** Positional arguments after the command name. */
  positionals: string[]
  values: OptionValues
  json: boolean
  debug: boolean
  out: Output
  err: Output
  /** Aborted on SIGINT / SIGTERM: long-running commands stop and exit cleanly. */
  signal: AbortSignal
  /** A progress bar on stderr, drawn only when stderr is a TTY. */
  progress(label: string): Progress
  /** Writes `value` as pretty JSON on stdout. */
  emitJson(value: unknown): void
  /** Writes a line of human output on stdout. */
  line(text?: string): void
}

export interface Command {
  name: string
  /** One line for `mqstore --help`. */
  summary: string
  /** The synopsis after `mqstore`, e.g. 'inspect <dir>'. */
  synopsis: string
  /** Paragraphs of the command's `--help`, after the synopsis and before the options. */
  description: string
  options?: Record<string, OptionSpec>
  /** Positionals accepted: [min, max]. */
  positionals?: [number, number]
  /**
   * A command that parses its own arguments (it gets them untouched, `--help` included). The
   * frame still turns its errors into one line and an exit code.
   */
  passthrough?: (args: string[], out: Output, err: Output) => Promise<number>
  run?: (ctx: CommandContext) => Promise<number | undefined>
}

const COMMON_OPTIONS: Record<string, OptionSpec> = {
  json: { type: 'boolean', description: 'machine-readable output: JSON on stdout' },
  debug: { type: 'boolean', description: 'print the stack trace of an error' },
  help: { type: 'boolean', short: 'h', description: 'this text' },
}

function optionLines(options: Record<string, OptionSpec>): string {
  const rows = Object.entries(options).map(([name, spec]) => {
    const flag = `${spec.short ? `-${spec.short}, ` : '    '}--${name}${spec.type === 'string' ? ` ${spec.value ?? 'VALUE'}` : ''}`
    return [flag, spec.description] as const
  })
  const width = Math.max(...rows.map(([flag]) => flag.length))
  return rows.map(([flag, text]) => `  ${flag.padEnd(width)}  ${text}`).join('\n')
}

export function commandHelp(command: Command): string {
  if (command.passthrough !== undefined) return `usage: mqstore ${command.synopsis}\n\n${command.description.trim()}\n`
  return [
    `usage: mqstore ${command.synopsis}`,
    '',
    command.description.trim(),
    '',
    'options:',
    optionLines({ ...command.options, ...COMMON_OPTIONS }),
    '',
    EXIT_CODES_TEXT,
  ].join('\n')
}

/**
 * A progress bar on a TTY: `label [#####-----] 50%`, redrawn when the percentage changes, erased
 * by `done()`. On anything else (a pipe, a file, --json) it writes nothing.
 */
export class Progress {
  private shown = -1

  constructor(
    private readonly err: Output,
    private readonly label: string,
    readonly enabled: boolean,
  ) {}

  update(done: number, total: number): void {
    if (!this.enabled || total <= 0) return
    const percent = Math.min(100, Math.floor((done / total) * 100))
    if (percent === this.shown) return
    this.shown = percent
    const width = Math.max(10, Math.min(40, (this.err.columns ?? 80) - this.label.length - 10))
    const filled = Math.round((percent / 100) * width)
    this.err.write(`\r${this.label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(percent).padStart(3)}%`)
  }

  done(): void {
    if (this.enabled && this.shown >= 0) this.err.write('\r\x1b[K')
    this.shown = -1
  }
}

/** A store error as the one line a user reads, with the exit code it maps to. */
export function describeError(error: unknown): { message: string; exitCode: number; code?: string } {
  if (error instanceof CliError) return { message: error.message, exitCode: error.exitCode }
  if (error instanceof MQStoreError) {
    if (error.code === 'LOCKED') {
      return {
        message: `${error.message}: the store is open in another process; stop it first, or use a read-only command (inspect, tail, get, stats, verify)`,
        exitCode: EXIT.LOCKED,
        code: error.code,
      }
    }
    return { message: `${error.message} (${error.code})`, exitCode: EXIT.FAILURE, code: error.code }
  }
  if (error instanceof Error && error.name === 'NotAStoreError') return { message: error.message, exitCode: EXIT.USAGE }
  const sys = error as NodeJS.ErrnoException
  if (error instanceof Error) return { message: error.message, exitCode: EXIT.FAILURE, code: sys.code }
  return { message: String(error), exitCode: EXIT.FAILURE }
}

function isParseError(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException)?.code
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS')
}

export interface RunIo {
  out: Output
  err: Output
  signal?: AbortSignal
}

/** Runs one command with `args` (what follows its name); returns the exit code. Never throws. */
export async function runCommand(command: Command, args: string[], io: RunIo): Promise<number> {
  const { out, err } = io
  const debug = args.includes('--debug')
  const json = args.includes('--json')
  const fail = (error: unknown): number => {
    const { message, exitCode, code } = describeError(error)
    err.write(`mqstore ${command.name}: ${message}\n`)
    if (exitCode === EXIT.USAGE && (error instanceof UsageError || isParseError(error))) {
      err.write(`run 'mqstore ${command.name} --help' for its options\n`)
    }
    if (debug && error instanceof Error && error.stack !== undefined) err.write(`${error.stack}\n`)
    if (json && command.passthrough === undefined) out.write(`${JSON.stringify({ error: { message, code, exitCode } })}\n`)
    return exitCode
  }
  try {
    // --debug is the frame's: a command that parses its own arguments never sees it.
    if (command.passthrough !== undefined)
      return await command.passthrough(
        args.filter((a) => a !== '--debug'),
        out,
        err,
      )
    const options = { ...command.options, ...COMMON_OPTIONS }
    let parsed: ReturnType<typeof parseArgs>
    try {
      parsed = parseArgs({
        args,
        options: Object.fromEntries(
          Object.entries(options).map(([name, spec]) => [name, spec.short ? { type: spec.type, short: spec.short } : { type: spec.type }]),
        ),
        allowPositionals: true,
        strict: true,
      })
    } catch (error) {
      throw new UsageError((error as Error).message.split('\n')[0])
    }
    const values = parsed.values as OptionValues
    if (values.help === true) {
      out.write(commandHelp(command))
      return EXIT.OK
    }
    const [min, max] = command.positionals ?? [0, 0]
    if (parsed.positionals.length < min) throw new UsageError(`missing argument: mqstore ${command.synopsis}`)
    if (parsed.positionals.length > max) throw new UsageError(`unexpected argument '${parsed.positionals[max]}'`)
    const ctx: CommandContext = {
      positionals: parsed.positionals,
      values,
      json,
      debug,
      out,
      err,
      signal: io.signal ?? new AbortController().signal,
      progress: (label) => new Progress(err, label, err.isTTY === true),
      emitJson: (value) => out.write(`${JSON.stringify(value, null, 2)}\n`),
      line: (text = '') => out.write(`${text}\n`),
    }
    return (await command.run!(ctx)) ?? EXIT.OK
  } catch (error) {
    return fail(error)
  }
}

// ---- argument helpers --------------------------------------------------------------------------

/** A non-negative safe integer option, or undefined when absent. */
export function intOption(values: OptionValues, name: string, min = 0): number | undefined {
  const text = values[name]
  if (text === undefined) return undefined
  const value = Number(text)
  if (typeof text !== 'string' || text.trim() === '' || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`--${name} needs an integer >= ${min}, got '${String(text)}'`)
  }
  return value
}

export function stringOption(values: OptionValues, name: string): string | undefined {
  const value = values[name]
  return typeof value === 'string' ? value : undefined
}

export function requireOption(values: OptionValues, name: string): string {
  const value = stringOption(values, name)
  if (value === undefined || value === '') throw new UsageError(`--${name} is required`)
  return value
}
