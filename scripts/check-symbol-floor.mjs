#!/usr/bin/env node
// Checks that a Linux addon binary needs no newer glibc or libstdc++ than the release floor, so a
// prebuild built in a newer container cannot silently fail to load (dlopen: "version GLIBCXX_3.4.30
// not found") on the oldest systems Node 20 itself supports.
//
//   node scripts/check-symbol-floor.mjs <file.node> [--glibc 2.28] [--glibcxx 3.4.25] [--cxxabi 1.3.11]
//
// The defaults are Node 20's own floor: glibc 2.28, and the libstdc++ of GCC 8 that ships with
// those systems (RHEL 8: GLIBCXX_3.4.25, CXXABI_1.3.11). Reads the dynamic symbol table with
// `objdump -T`; prints the highest version of each family; exits 1 naming every symbol above its
// floor.
import { spawnSync } from 'node:child_process'

const FLOORS = { GLIBC: '2.28', GLIBCXX: '3.4.25', CXXABI: '1.3.11' }

function compareVersions(a, b) {
  const x = a.split('.').map(Number)
  const y = b.split('.').map(Number)
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0)
    if (d !== 0) return d
  }
  return 0
}

function parseArgs(argv) {
  const floors = { ...FLOORS }
  let file = null
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const flag = /^--(glibc|glibcxx|cxxabi)$/.exec(arg)
    if (flag) {
      const value = argv[++i]
      if (!value || !/^\d+(\.\d+)*$/.test(value)) throw new Error(`${arg} needs a version like 2.28`)
      floors[flag[1].toUpperCase()] = value
    } else if (file === null) {
      file = arg
    } else {
      throw new Error(`unexpected argument ${arg}`)
    }
  }
  if (file === null) throw new Error('usage: check-symbol-floor.mjs <file.node> [--glibc V] [--glibcxx V] [--cxxabi V]')
  return { file, floors }
}

let args
try {
  args = parseArgs(process.argv.slice(2))
} catch (error) {
  console.error(error.message)
  process.exit(2)
}

const dump = spawnSync('objdump', ['-T', args.file], { encoding: 'utf8' })
if (dump.error || dump.status !== 0) {
  console.error(`objdump -T ${args.file} failed: ${dump.error?.message ?? dump.stderr}`)
  process.exit(2)
}

let failed = false
for (const [family, floor] of Object.entries(args.floors)) {
  const needs = new Map() // version -> symbols
  for (const line of dump.stdout.split('\n')) {
    const match = new RegExp(`\\b${family}_(\\d+(?:\\.\\d+)*)\\)?\\s+(\\S+)\\s*$`).exec(line)
    if (!match) continue
    const list = needs.get(match[1]) ?? []
    list.push(match[2])
    needs.set(match[1], list)
  }
  const versions = [...needs.keys()].sort(compareVersions)
  const highest = versions.at(-1)
  console.log(`highest ${family}_ symbol: ${highest ?? 'none'} (floor ${floor})`)
  for (const version of versions) {
    if (compareVersions(version, floor) <= 0) continue
    failed = true
    console.error(`${args.file} needs ${family}_${version}, above the ${floor} floor: ${needs.get(version).join(', ')}`)
  }
}
process.exit(failed ? 1 : 0)
