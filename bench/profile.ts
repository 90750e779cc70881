// A small summariser of V8 CPU profiles (node --cpu-prof): self time per function, aggregated by
// function name and file:line, over the whole profile or over a window of it (one bench phase).
// The profile's clock is the one process.hrtime reads, in microseconds, so windows recorded by
// the bench with process.hrtime select the samples of a phase.
//
//   node dist/bench/profile.js FILE.cpuprofile [top]

import * as fs from 'node:fs'
import { fileURLToPath } from 'node:url'

export interface CpuProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}

export interface CpuProfile {
  nodes: CpuProfileNode[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

/** A time window in microseconds of the process.hrtime clock. */
export interface Window {
  name: string
  fromUs: number
  toUs: number
}

export interface ProfileEntry {
  /** Function name, '(anonymous)' for none. */
  name: string
  /** file:line (1-based), '' for the VM's own entries ('(garbage collector)', '(idle)'...). */
  location: string
  selfMs: number
  /** Share of the sampled time of the window, 0..1. */
  share: number
}

export interface ProfileSummary {
  window: string
  totalMs: number
  entries: ProfileEntry[]
}

/** A short location: the path from dist/ or node_modules/ on, else the file name. */
export function shortLocation(url: string, lineNumber: number): string {
  if (url === '') return ''
  let path = url.replace(/^file:\/\//, '')
  const cut = Math.max(path.lastIndexOf('/dist/'), path.lastIndexOf('/node_modules/'))
  if (cut >= 0) path = path.slice(cut + 1)
  else if (!path.startsWith('node:')) path = path.slice(path.lastIndexOf('/') + 1)
  return lineNumber >= 0 ? `${path}:${lineNumber + 1}` : path
}

/**
 * Self time per function over `window` (the whole profile without one): each sample counts the
 * time since the sample before it, for the function on top of the stack.
 */
export function summarizeProfile(profile: CpuProfile, window?: Window, top = 10): ProfileSummary {
  const frames = new Map<number, CpuProfileNode['callFrame']>()
  for (const node of profile.nodes) frames.set(node.id, node.callFrame)
  const selfUs = new Map<string, { name: string; location: string; us: number }>()
  let totalUs = 0
  let at = profile.startTime
  for (let k = 0; k < profile.samples.length; k++) {
    const delta = profile.timeDeltas[k] ?? 0
    at += delta
    if (window !== undefined && (at < window.fromUs || at > window.toUs)) continue
    const frame = frames.get(profile.samples[k])
    if (frame === undefined) continue
    const name = frame.functionName === '' ? '(anonymous)' : frame.functionName
    const location = shortLocation(frame.url, frame.lineNumber)
    const key = `${name} ${location}`
    const entry = selfUs.get(key)
    if (entry === undefined) selfUs.set(key, { name, location, us: delta })
    else entry.us += delta
    totalUs += delta
  }
  const entries = [...selfUs.values()]
    .sort((a, b) => b.us - a.us)
    .slice(0, top)
    .map((e) => ({ name: e.name, location: e.location, selfMs: e.us / 1000, share: totalUs > 0 ? e.us / totalUs : 0 }))
  return { window: window?.name ?? 'whole run', totalMs: totalUs / 1000, entries }
}

/** The summary as text lines: one header, one line per function. */
export function formatProfileSummary(summary: ProfileSummary): string[] {
  const lines = [`${summary.window}: ${summary.totalMs.toFixed(0)} ms sampled`]
  for (const e of summary.entries) {
    lines.push(
      `  ${e.selfMs.toFixed(1).padStart(9)} ms ${(e.share * 100).toFixed(1).padStart(5)}%  ${e.name}${e.location === '' ? '' : ` ${e.location}`}`,
    )
  }
  return lines
}

export function readProfile(path: string): CpuProfile {
  return JSON.parse(fs.readFileSync(path, 'utf8')) as CpuProfile
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [path, top] = process.argv.slice(2)
  if (path === undefined) {
    process.stderr.write('usage: node dist/bench/profile.js FILE.cpuprofile [top]\n')
    process.exitCode = 2
  } else {
    process.stdout.write(`${formatProfileSummary(summarizeProfile(readProfile(path), undefined, Number(top ?? 30))).join('\n')}\n`)
  }
}
