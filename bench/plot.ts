// A hand-written SVG line chart: throughput against message size, one line per engine, two panels
// (messages per second, MiB per second), both axes logarithmic. No dependency; the output is a
// plain, self-contained SVG that GitHub renders in the README.

export interface SizePoint {
  /** Body size in bytes. */
  size: number
  messagesPerSecond: number
  mibPerSecond: number
}

export interface EngineSeries {
  engine: string
  label: string
  points: SizePoint[]
}

const COLORS = ['#d62728', '#1f77b4', '#2ca02c', '#7f7f7f', '#9467bd', '#ff7f0e']
const PANEL_WIDTH = 440
const PANEL_HEIGHT = 300
const MARGIN = { left: 70, right: 20, top: 70, bottom: 90 }
const GAP = 60

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
}

export function sizeLabel(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${bytes / 1024 / 1024} MiB`
  if (bytes >= 1024) return `${bytes / 1024} KiB`
  return `${bytes} B`
}

function numberLabel(value: number): string {
  if (value >= 1e6) return `${+(value / 1e6).toPrecision(3)}M`
  if (value >= 1e3) return `${+(value / 1e3).toPrecision(3)}k`
  return `${+value.toPrecision(3)}`
}

interface Panel {
  title: string
  unit: string
  value: (p: SizePoint) => number
}

function panel(series: EngineSeries[], spec: Panel, x0: number, sizes: number[]): string {
  const values = series.flatMap((s) => s.points.map(spec.value)).filter((v) => v > 0 && Number.isFinite(v))
  const lo = 10 ** Math.floor(Math.log10(Math.min(...values)))
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...values)))
  const xLo = Math.log2(sizes[0])
  const xHi = Math.log2(sizes[sizes.length - 1])
  const px = (size: number) => x0 + ((Math.log2(size) - xLo) / Math.max(1e-9, xHi - xLo)) * PANEL_WIDTH
  const py = (value: number) =>
    MARGIN.top + PANEL_HEIGHT - ((Math.log10(value) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * PANEL_HEIGHT
  const out: string[] = []
  out.push(
    `<text x="${x0 + PANEL_WIDTH / 2}" y="${MARGIN.top - 12}" text-anchor="middle" font-weight="bold">${escapeXml(spec.title)}</text>`,
  )
  // Decades with their 2x and 5x lines, labelled at the decades.
  for (let decade = lo; decade <= hi * 1.0001; decade *= 10) {
    for (const m of [1, 2, 5]) {
      const v = decade * m
      if (v > hi * 1.0001) break
      const y = py(v).toFixed(1)
      out.push(`<line x1="${x0}" x2="${x0 + PANEL_WIDTH}" y1="${y}" y2="${y}" stroke="${m === 1 ? '#ccc' : '#eee'}"/>`)
      if (m === 1) out.push(`<text x="${x0 - 8}" y="${y}" text-anchor="end" dominant-baseline="middle">${numberLabel(v)}</text>`)
    }
  }
  for (const size of sizes) {
    const x = px(size).toFixed(1)
    out.push(`<line x1="${x}" x2="${x}" y1="${MARGIN.top}" y2="${MARGIN.top + PANEL_HEIGHT}" stroke="#eee"/>`)
    out.push(`<text x="${x}" y="${MARGIN.top + PANEL_HEIGHT + 18}" text-anchor="middle">${sizeLabel(size)}</text>`)
  }
  out.push(`<rect x="${x0}" y="${MARGIN.top}" width="${PANEL_WIDTH}" height="${PANEL_HEIGHT}" fill="none" stroke="#888"/>`)
  out.push(
    `<text x="${x0 + PANEL_WIDTH / 2}" y="${MARGIN.top + PANEL_HEIGHT + 40}" text-anchor="middle">message body size (log scale)</text>`,
  )
  const yMid = MARGIN.top + PANEL_HEIGHT / 2
  out.push(
    `<text x="${x0 - 55}" y="${yMid}" text-anchor="middle" transform="rotate(-90 ${x0 - 55} ${yMid})">${escapeXml(spec.unit)} (log scale)</text>`,
  )
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]
    const points = s.points.filter((p) => spec.value(p) > 0)
    const path = points.map((p) => `${px(p.size).toFixed(1)},${py(spec.value(p)).toFixed(1)}`).join(' ')
    out.push(`<polyline data-engine="${escapeXml(s.engine)}" points="${path}" fill="none" stroke="${color}" stroke-width="2.5"/>`)
    for (const p of points) {
      out.push(
        `<circle cx="${px(p.size).toFixed(1)}" cy="${py(spec.value(p)).toFixed(1)}" r="3.5" fill="${color}"><title>${escapeXml(`${s.label}, ${sizeLabel(p.size)}: ${numberLabel(spec.value(p))} ${spec.unit}`)}</title></circle>`,
      )
    }
  })
  return out.join('\n')
}

/** The chart as an SVG document. `subtitle` says where and how it was measured. */
export function renderThroughputSvg(series: EngineSeries[], title: string, subtitle: string): string {
  const sizes = [...new Set(series.flatMap((s) => s.points.map((p) => p.size)))].sort((a, b) => a - b)
  if (sizes.length === 0) throw new Error('nothing to plot')
  const width = MARGIN.left + PANEL_WIDTH + GAP + MARGIN.left + PANEL_WIDTH + MARGIN.right
  const height = MARGIN.top + PANEL_HEIGHT + MARGIN.bottom
  const legendY = height - 22
  const legend = series
    .map((s, i) => {
      const x = MARGIN.left + i * 220
      const color = COLORS[i % COLORS.length]
      return `<line x1="${x}" x2="${x + 24}" y1="${legendY}" y2="${legendY}" stroke="${color}" stroke-width="3"/><text x="${x + 30}" y="${legendY}" dominant-baseline="middle">${escapeXml(s.label)}</text>`
    })
    .join('\n')
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">
<rect width="100%" height="100%" fill="#fff"/>
<text x="${width / 2}" y="24" text-anchor="middle" font-size="16" font-weight="bold">${escapeXml(title)}</text>
<text x="${width / 2}" y="42" text-anchor="middle" fill="#555">${escapeXml(subtitle)}</text>
${panel(series, { title: 'messages per second', unit: 'msg/s', value: (p) => p.messagesPerSecond }, MARGIN.left, sizes)}
${panel(series, { title: 'body bytes per second', unit: 'MiB/s', value: (p) => p.mibPerSecond }, MARGIN.left * 2 + PANEL_WIDTH + GAP, sizes)}
${legend}
</svg>
`
}
