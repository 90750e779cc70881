// The bench scripts' command lines: --help prints the usage, a bad option or value is a usage
// error (status 2, the message and the usage), never a stack trace.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { repoRoot } from './helpers/tmp.js'

function run(script: string, ...args: string[]) {
  return spawnSync(process.execPath, [join(repoRoot, 'dist/bench', script), ...args], { encoding: 'utf8', timeout: 60_000 })
}

describe('bench command lines', () => {
  for (const script of ['scale.js', 'allocations.js', 'sizes.js']) {
    it(`${script}: --help prints its usage; an unknown option is refused with it`, () => {
      const help = run(script, '--help')
      expect(help.status).toBe(0)
      expect(help.stdout).toContain(`usage: node dist/bench/${script}`)
      const bad = run(script, '--no-such-option')
      expect(bad.status).toBe(2)
      expect(bad.stderr).toContain("Unknown option '--no-such-option'")
      expect(bad.stderr).not.toContain('    at ')
    })
  }

  it('scale.js refuses queue counts that are not positive integers', () => {
    const r = run('scale.js', '--queues', '50,0')
    expect(r.status).toBe(2)
    expect(r.stderr).toContain('--queues takes a comma-separated list of positive integers')
  })
})
