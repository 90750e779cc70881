#!/usr/bin/env node
// Bundles the package's entry points (mqstore, mqstore/internals, mqstore/metrics and the CLI) from
// the compiled modules in dist/lib into dist/pkg: a few files instead of about 170 modules, which
// Node would otherwise resolve, read and compile one at a time on import (about 130 ms of a fresh
// process's start on the bench machine, against about 50 ms for the bundles). Code the entry points
// share lands in shared chunks, so each class exists once whichever entry point a program imports.
// The typings stay in dist/lib (package.json's "types" conditions point there).
//
// Run after tsc (npm run build:ts does both).
import { rmSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { rolldown } from 'rolldown'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const from = join(root, 'dist', 'lib')
const to = join(root, 'dist', 'pkg')

const entries = {
  index: join(from, 'index.js'),
  internals: join(from, 'internals.js'),
  metrics: join(from, 'metrics.js'),
  cli: join(from, 'cli', 'main.js'),
}

// Node's own modules, the addon's loader and the optional peer stay imports of the bundles.
const builtins = new Set([...builtinModules, ...builtinModules.map((name) => `node:${name}`)])
const external = (id) => builtins.has(id) || id.startsWith('node:') || id === 'node-gyp-build' || id === 'prom-client'

rmSync(to, { recursive: true, force: true })
const bundle = await rolldown({ input: entries, platform: 'node', external })
try {
  await bundle.write({
    dir: to,
    format: 'esm',
    entryFileNames: '[name].js',
    chunkFileNames: 'shared-[hash].js',
  })
} finally {
  await bundle.close()
}
