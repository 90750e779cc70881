// Failover by hand across real processes (the compiled package, `npm run build:ts`): a
// SYNC_MASTER is SIGKILLed in the middle of a stream of puts; every PUT_OK it acknowledged is on
// the slave; the slave is promoted with setBrokerRole and takes puts; the old master reopens (it
// recovers) and joins the new master as its slave, refused first when it holds messages the new
// master never got, then cut back with truncateToMaster; both logs end byte for byte equal.
import { type ChildProcess, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach, expect, it } from 'vitest'
import { tempDir } from '../helpers/tmp.js'
import { commitLogBytes, JsonLinesChild, type Line, waitFor } from './ha-helpers.js'

const CHILD = fileURLToPath(new URL('./failover-child.mjs', import.meta.url))
const FILE = 256 * 1024

class Child extends JsonLinesChild {
  constructor(
    readonly name: string,
    process: ChildProcess,
  ) {
    super(process)
  }

  /** Sends a command and waits for the first line after it that `answer` accepts. */
  async ask(command: Line, answer: (line: Line) => boolean, timeoutMs = 60_000): Promise<Line> {
    const from = this.lines.length
    this.process.stdin?.write(`${JSON.stringify(command)}\n`)
    let found: Line | undefined
    await waitFor(
      () => {
        const error = this.lines.slice(from).find((l) => l.error !== undefined)
        if (error !== undefined) throw new Error(`${this.name}: ${error.error}`)
        found = this.lines.slice(from).find(answer)
        return found !== undefined
      },
      `${this.name}: an answer to ${JSON.stringify(command).slice(0, 80)}`,
      timeoutMs,
    )
    return found as Line
  }

  stats(): Promise<Line> {
    return this.ask({ stats: true }, (l) => l.ha !== undefined)
  }

  /** Asks for stats until `check` accepts them; the child's log is in the error when it never does. */
  async until(what: string, check: (stats: Line) => boolean, timeoutMs = 60_000): Promise<Line> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const stats = await this.stats()
      if (check(stats)) return stats
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${this.logs().join('\n')}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  logs(): string[] {
    return this.lines.filter((l) => l.log !== undefined).map((l) => l.log as string)
  }
}

const children: Child[] = []
afterEach(async () => {
  for (const child of children.splice(0)) await child.stop('SIGKILL')
})

function start(name: string, dir: string): Child {
  const child = new Child(name, spawn(process.execPath, [CHILD, dir], { stdio: ['pipe', 'pipe', 'pipe'] }))
  children.push(child)
  return child
}

const quick = { haSendHeartbeatInterval: 500, haHousekeepingInterval: 10_000 }

it('fails over by hand: SIGKILL of a SYNC_MASTER mid-stream, promotion, the old master rejoins', { timeout: 300_000 }, async () => {
  const oldDir = tempDir('mqstore-ha-failover-old-')
  const newDir = tempDir('mqstore-ha-failover-new-')
  const master = start('master', oldDir)
  const { port } = await master.ask(
    { open: { brokerRole: 'SYNC_MASTER', haListenPort: 0, syncFlushTimeout: 10_000, ...quick } },
    (l) => l.opened,
  )
  const slave = start('slave', newDir)
  await slave.ask({ open: { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${port}`, haListenPort: 0, ...quick } }, (l) => l.opened)
  await waitFor(() => slave.logs().some((l) => l.includes('connected to master')), 'the slave to connect', 60_000)
  // Until the slave's first report, a SYNC_MASTER answers SLAVE_NOT_AVAILABLE (no slave acks yet).
  await master.until('the slave to report', (stats) =>
    ((stats.ha as { connections: { ackOffset: number }[] }).connections ?? []).some((c) => c.ackOffset >= 0),
  )

  // Four put loops in flight: the kill lands between appends and acknowledgements.
  master.process.stdin?.write(`${JSON.stringify({ stream: { prefix: 's', lanes: 4 } })}\n`)
  const acked = (): number[] => master.lines.flatMap((l) => (l.ok === undefined ? [] : (l.ok as number[])))
  await waitFor(() => acked().length >= 3_000, '3,000 acknowledged puts', 120_000)
  const killedAt = Date.now()
  await master.stop('SIGKILL')
  const ackedIndices = acked()
  const ackedEnd = Math.max(...master.lines.filter((l) => l.ok?.length > 0).map((l) => l.end as number))
  expect(master.lines.flatMap((l) => l.other ?? [])).toEqual([])

  // Every acknowledged message is on the slave.
  await waitFor(() => slave.logs().some((l) => l.includes('replication from')), 'the slave to notice', 60_000)
  const noticedAt = slave.lines.find((l) => l.log?.includes('replication from'))?.t as number
  const before = await slave.stats()
  expect(before.max).toBeGreaterThanOrEqual(ackedEnd)
  const { missing } = await slave.ask({ check: { prefix: 's', indices: ackedIndices } }, (l) => l.missing !== undefined)
  expect(missing).toEqual([])

  // Promotion: it takes puts from its end.
  const promoted = await slave.ask({ role: 'ASYNC_MASTER' }, (l) => l.role !== undefined)
  const promotedEnd = promoted.max as number
  expect(promotedEnd).toBeLessThanOrEqual(before.max)
  expect(promoted.port).toBeGreaterThan(0)
  const puts = await slave.ask({ put: { prefix: 'after', count: 20 } }, (l) => l.put !== undefined)
  expect(puts.put.every((s: string) => s === 'PUT_OK')).toBe(true)
  const newAddress = `127.0.0.1:${promoted.port}`

  // The old master reopens (a crash recovery) and joins the new master.
  const old = start('old master', oldDir)
  const reopened = await old.ask({ open: { haListenPort: 0, ...quick } }, (l) => l.opened)
  expect(reopened.lastExitOK).toBe(false)
  const oldEnd = reopened.max as number
  expect(oldEnd).toBeGreaterThanOrEqual(ackedEnd)
  const ahead = oldEnd > promotedEnd
  await old.ask({ role: 'SLAVE', options: { haMasterAddress: newAddress } }, (l) => l.role !== undefined)
  let refusal = ''
  if (ahead) {
    // It holds messages the new master never got: refused, nothing cut.
    await waitFor(() => old.logs().some((l) => l.includes('replication refused')), 'the refusal', 60_000)
    const refused = await old.stats()
    expect(refused.ha.slave.status).toBe('refused')
    expect(refused.max).toBe(oldEnd)
    refusal = refused.ha.slave.notConnectedReason
    expect(refusal).toContain(`from offset ${promotedEnd} to ${oldEnd}`)
    await old.ask({ role: 'SLAVE', options: { haMasterAddress: newAddress, truncateToMaster: true } }, (l) => l.role !== undefined)
  }
  // The new master becomes a SYNC_MASTER again, served by the old one.
  await slave.ask({ role: 'SYNC_MASTER' }, (l) => l.role !== undefined)
  await old.until('the old master to follow', (l) => l.ha.slave?.status === 'replicating')
  const synced = await slave.ask({ put: { prefix: 'synced', count: 20 } }, (l) => l.put !== undefined)
  expect(synced.put.every((s: string) => s === 'PUT_OK')).toBe(true)
  const end = synced.max as number
  const caught = await old.until('the old master to catch up', (l) => l.max === end && l.behind === 0)
  expect(caught.ha.slave.status).toBe('replicating')
  const { missing: lost } = await old.ask(
    { check: { prefix: 'synced', indices: Array.from({ length: 20 }, (_, i) => i) } },
    (l) => l.missing !== undefined,
  )
  expect(lost).toEqual([])
  await old.ask({ close: true }, (l) => l.closed)
  await slave.ask({ close: true }, (l) => l.closed)
  expect(commitLogBytes(oldDir, 0, end, FILE).equals(commitLogBytes(newDir, 0, end, FILE))).toBe(true)

  // What happened, for the record.
  const tagged = (child: Child, since: number) =>
    child.lines.filter((l) => l.log !== undefined && l.t >= since).map((l) => `${child.name} +${l.t - killedAt} ms: ${l.log}`)
  console.log(
    [
      `acknowledged ${ackedIndices.length} messages, up to offset ${ackedEnd}; SIGKILL at +0 ms`,
      `slave noticed at +${noticedAt - killedAt} ms; its end ${before.max}; promoted in ${promoted.ms} ms at offset ${promotedEnd}`,
      `old master recovered to ${oldEnd} (${ahead ? `${oldEnd - promotedEnd} bytes ahead` : 'not ahead'}); refusal: ${refusal || 'none'}`,
      `final end ${end}`,
      ...tagged(slave, killedAt - 1000),
      ...tagged(old, 0),
    ].join('\n'),
  )
})
