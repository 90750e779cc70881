// The human-readable form of a verify report.
import type { CommitLogReport, ProblemList, VerifyProblem, VerifyReport } from './report.js'

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`
}

function time(ms: number): string {
  return ms > 0 ? new Date(ms).toISOString() : 'none'
}

function problemLine(p: VerifyProblem): string {
  const where = [`${p.file} @${p.offset}`]
  if (p.queueOffset !== undefined) where.push(`queue offset ${p.queueOffset}`)
  if (p.phyOffset !== undefined && p.entry === undefined && p.queueOffset === undefined) where.push(`commit-log offset ${p.phyOffset}`)
  return `  ${where.join(', ')}: ${p.reason}`
}

/** A few readable lines, then every problem kept in the report. */
export function formatVerifyReport(r: VerifyReport): string {
  const cl = r.commitLog
  const cq = r.consumeQueues
  const ix = r.index
  const cp = r.checkpoint
  const end: Record<CommitLogReport['endReason'], string> = {
    empty: 'no files',
    'end-of-data': 'end of data',
    'end-of-files': 'the last file is full',
    damage: 'DAMAGE',
    gap: 'a GAP between files',
  }
  const lines = [
    `store ${r.dir}: ${r.ok ? 'OK' : `${plural(r.problemCount, 'problem')} found`} (${r.elapsedMs} ms)`,
    `commit log: ${plural(cl.files, 'file')} of ${cl.fileSize} bytes, ${plural(cl.records, 'record')} (${cl.bytes} bytes), ` +
      `offsets ${cl.minOffset}..${cl.validEnd}, walk stopped at ${end[cl.endReason]}${cl.damage === null ? '' : ` (${cl.damage.kind})`}`,
    `consume queues: ${plural(cq.queues, 'queue')}, ${plural(cq.files, 'file')}, ${plural(cq.units, 'unit')} (${cq.expired} expired)` +
      (cq.missing > 0 ? `, ${plural(cq.missing, 'record')} without a unit` : ''),
    `index: ${plural(ix.files, 'file')}, ${plural(ix.entries, 'entry', 'entries')} (${ix.expired} expired)`,
    cp.present
      ? `checkpoint: physic ${time(cp.physicMsgTimestamp)}, logics ${time(cp.logicsMsgTimestamp)}, index ${time(cp.indexMsgTimestamp)}`
      : 'checkpoint: absent',
    r.cleanShutdown ? 'shutdown: clean' : 'shutdown: NOT clean (abort file present: the store is open, or crashed; its next open recovers)',
  ]
  for (const note of r.notes) lines.push(`note: ${note}`)
  const sections: [string, ProblemList][] = [
    ['commit log', cl],
    ['consume queues', cq],
    ['index', ix],
    ['checkpoint', cp],
  ]
  for (const [name, list] of sections) {
    if (list.problems.length === 0) continue
    lines.push(`${name} problems:`)
    for (const p of list.problems) lines.push(problemLine(p))
    if (list.moreProblems > 0) lines.push(`  ... and ${list.moreProblems} more`)
  }
  return `${lines.join('\n')}\n`
}
