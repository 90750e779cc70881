// The source layout's rules: no import cycles, and nothing under the facade imports it.
import * as fs from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

import { repoRoot } from './helpers/tmp.js'

const lib = join(repoRoot, 'lib')

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name)
    if (e.isDirectory()) return sources(path)
    return e.name.endsWith('.ts') ? [path] : []
  })
}

/** Relative imports of a module (type-only ones included: they still tie the modules together). */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8')
  const found: string[] = []
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+'(\.[^']+)'/g)) {
    found.push(resolve(dirname(file), m[1].replace(/\.js$/, '.ts')))
  }
  return found
}

const graph = new Map(sources(lib).map((f) => [f, importsOf(f)]))
const name = (f: string) => relative(lib, f)

describe('source layout', () => {
  it('has no import cycles', () => {
    const cycles: string[] = []
    const state = new Map<string, 'open' | 'done'>()
    const stack: string[] = []
    const visit = (file: string) => {
      state.set(file, 'open')
      stack.push(file)
      for (const dep of graph.get(file) ?? []) {
        if (state.get(dep) === 'open') cycles.push([...stack.slice(stack.indexOf(dep)), dep].map(name).join(' -> '))
        else if (!state.has(dep)) visit(dep)
      }
      stack.pop()
      state.set(file, 'done')
    }
    for (const file of graph.keys()) if (!state.has(file)) visit(file)
    expect(cycles).toEqual([])
  })

  it('no module under lib/store imports the facade', () => {
    const facade = join(lib, 'store', 'message-store.ts')
    const importers = [...graph].filter(([file, deps]) => file.startsWith(join(lib, 'store')) && deps.includes(facade))
    expect(importers.map(([file]) => name(file))).toEqual([])
  })

  it('no source file but the record codec is over 700 lines', () => {
    const long = [...graph.keys()]
      .filter((f) => !f.endsWith(join('commitlog', 'record.ts')))
      .map((f) => ({ file: name(f), lines: fs.readFileSync(f, 'utf8').split('\n').length }))
      .filter((f) => f.lines > 700)
    expect(long).toEqual([])
  })
})
