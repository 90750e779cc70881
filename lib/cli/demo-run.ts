// `npm start`: the demo (demo.ts) on ./data, or on the directory given. A module of its own, so that
// importing the demo (the `mqstore demo` command, in the CLI's bundle too) never starts it.
import { resolve } from 'node:path'

import { runDemo } from './demo.js'

runDemo(resolve(process.argv[2] ?? 'data')).catch((error: unknown) => {
  process.stderr.write(`demo failed: ${(error as Error)?.stack ?? String(error)}\n`)
  process.exitCode = 1
})
