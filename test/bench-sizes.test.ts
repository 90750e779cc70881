// The throughput-by-size benchmark's plot and its runner, run through `mqstore bench sizes`.
import * as fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { renderThroughputSvg } from '../bench/plot.js'
import { repoRoot, tempDir } from './helpers/tmp.js'

describe('bench sizes', () => {
  it('draws one line per engine, left to right by size, higher for the faster engine', () => {
    const points = (scale: number) =>
      [64, 1024, 65536].map((size) => ({ size, messagesPerSecond: (scale * 1e5) / Math.log2(size), mibPerSecond: (scale * size) / 100 }))
    const svg = renderThroughputSvg(
      [
        { engine: 'fast', label: 'fast <engine>', points: points(10) },
        { engine: 'slow', label: 'slow & steady', points: points(1) },
      ],
      'title',
      'subtitle',
    )
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true)
    expect(svg).toContain('fast &lt;engine&gt;')
    expect(svg).toContain('slow &amp; steady')
    const lines = [...svg.matchAll(/<polyline data-engine="(\w+)" points="([^"]+)"/g)].map((m) => ({
      engine: m[1],
      xy: m[2].split(' ').map((p) => p.split(',').map(Number)),
    }))
    // Two panels (msg/s, MiB/s) per engine.
    expect(lines.map((l) => l.engine)).toEqual(['fast', 'slow', 'fast', 'slow'])
    for (const line of lines) {
      expect(line.xy).toHaveLength(3)
      expect(line.xy[0][0]).toBeLessThan(line.xy[1][0])
      expect(line.xy[1][0]).toBeLessThan(line.xy[2][0])
    }
    // SVG y grows downwards: the faster engine is drawn above the slower one at every size.
    for (let i = 0; i < 3; i++) expect(lines[0].xy[i][1]).toBeLessThan(lines[1].xy[i][1])
  })

  it('mqstore bench sizes measures every size for the engines asked and writes the SVG', () => {
    const out = join(tempDir('mqstore-bench-sizes-'), 'plot.svg')
    const r = spawnSync(
      process.execPath,
      [join(repoRoot, 'dist/lib/cli/main.js'), 'bench', 'sizes', '--only', 'raw,mqstore', '--budget', '0.01', '--out', out, '--json'],
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    )
    expect(r.status, r.stderr).toBe(0)
    const result = JSON.parse(r.stdout)
    expect(result.series.map((s: { engine: string }) => s.engine)).toEqual(['raw', 'mqstore'])
    for (const series of result.series) {
      expect(series.points.map((p: { size: number }) => p.size)).toEqual([64, 256, 1024, 4096, 16384, 65536])
      for (const p of series.points) expect(p.messagesPerSecond).toBeGreaterThan(0)
    }
    expect(fs.readFileSync(out, 'utf8')).toContain('data-engine="mqstore"')
  })
})
