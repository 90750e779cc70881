// `mqstore bench [...]`: runs the benchmark runner (what `npm run bench` runs) in a child process,
// passing the arguments on; `mqstore bench sizes [...]` runs the throughput-by-message-size sweep
// that draws bench/throughput-by-size.svg. The benchmark ships with the source, not the package.
import { spawn } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'

import { packageRoot } from '../package-root.js'
import { CliError, EXIT, type Command, type Output } from './frame.js'

/** The runners' compiled files in a source checkout (dist/bench, beside dist/lib). */
const RUNNERS = {
  run: ['dist', 'bench', 'run.js'],
  sizes: ['dist', 'bench', 'sizes.js'],
}

const BENCH_HELP = `Runs the benchmark: mqstore against lmdb and SQLite (better-sqlite3) on one workload (put,
ordered scan, lookups by key, reopen, durable puts), each engine in its own child process. Every
option is the runner's (see bench/README.md):

  mqstore bench --count 100000 --sync-count 5000
  mqstore bench --json > results.json

'mqstore bench sizes' instead measures put throughput against message size (64 B to 64 KiB) for
mqstore, lmdb, better-sqlite3 and a plain fs.writeSync append, and writes an SVG plot:

  mqstore bench sizes [--out FILE.svg] [--budget MIB] [--json]

Both show progress on stderr and print the results on stdout (--json: as JSON). They need a
source checkout (the benchmark is not in the npm package) with the peers' dev dependencies.
Exit code: the runner's (0 ok, 1 an engine failed, 2 usage or --strict target missed).`

function runNode(script: readonly string[], args: string[], out: Output, err: Output): Promise<number> {
  const path = join(packageRoot(), ...script)
  if (!fs.existsSync(path)) {
    throw new CliError(`the benchmark is not in this installation (${path} is missing): run it from a source checkout, 'npm run bench'`)
  }
  return new Promise((resolve, reject) => {
    // stdout and stderr pass straight through, so the runner sees the same TTY (or pipe) we do.
    const child = spawn(process.execPath, [path, ...args], {
      stdio: ['ignore', out === process.stdout ? 'inherit' : 'pipe', err === process.stderr ? 'inherit' : 'pipe'],
    })
    child.stdout?.on('data', (chunk: Buffer) => out.write(chunk.toString()))
    child.stderr?.on('data', (chunk: Buffer) => err.write(chunk.toString()))
    const forward = (signal: NodeJS.Signals) => child.kill(signal)
    process.once('SIGINT', forward)
    child.on('error', reject)
    child.on('close', (code, signal) => {
      process.off('SIGINT', forward)
      resolve(code ?? (signal === null ? EXIT.FAILURE : 128 + 2))
    })
  })
}

export const benchCommand: Command = {
  name: 'bench',
  summary: 'run the benchmark (vs lmdb and SQLite), or `bench sizes` for the throughput plot',
  synopsis: 'bench [sizes] [runner options]',
  description: BENCH_HELP,
  passthrough: async (args, out, err) => {
    if (args[0] === 'sizes') return runNode(RUNNERS.sizes, args.slice(1), out, err)
    if (args.includes('--help') || args.includes('-h')) {
      out.write(`usage: mqstore bench [sizes] [runner options]\n\n${BENCH_HELP}\n`)
      return EXIT.OK
    }
    return runNode(RUNNERS.run, args, out, err)
  },
}
