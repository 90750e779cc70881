// A slave whose disk fills up (a real tiny tmpfs): stats().ha.slave says diskFull and the log
// says why; once there is space again (the tmpfs grown), replication resumes where it stopped
// and the slave ends with the master's log byte for byte.
import * as fs from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { tempDir } from '../helpers/tmp.js'
import { mountTmpfs, tmpfs, unmountTmpfs } from '../helpers/tmpfs.js'
import { caughtUp, closeAll, commitLogBytes, joinedFromStart, messages, openStore, waitFor } from './ha-helpers.js'

const mounted: string[] = []
afterEach(async () => {
  await closeAll()
  for (const dir of mounted.splice(0)) {
    unmountTmpfs(dir)
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

describe.runIf(tmpfs.ok)('a slave on a full disk (tmpfs)', () => {
  it('reports diskFull, logs it, and resumes once space is freed', async () => {
    const masterDir = tempDir('mqstore-ha-full-master-')
    const master = await openStore(masterDir, { haListenPort: 0 })
    const slaveDir = tempDir('mqstore-ha-full-slave-')
    mountTmpfs(slaveDir, '640k')
    mounted.push(slaveDir)
    const logs: string[] = []
    const slave = await openStore(slaveDir, {
      brokerRole: 'SLAVE',
      haMasterAddress: `127.0.0.1:${master.stats().ha.port}`,
      messageIndexEnable: false,
      logger: (level, message) => logs.push(`${level} ${message}`),
    })
    await joinedFromStart(master)
    for (let i = 0; i < 6000; i += 200) await master.putMessages(messages(200, `f${i}`))
    const end = master.getMaxPhyOffset()
    expect(end).toBeGreaterThan(1024 * 1024)
    await waitFor(() => slave.stats().ha.slave?.status === 'diskFull', 'the slave to fill its disk')
    const stuck = slave.getMaxPhyOffset()
    expect(stuck).toBeLessThan(end)
    expect(logs.join('\n')).toMatch(
      /error the disk is full: cannot append \d+ replicated bytes at \d+; replication resumes once there is space/,
    )
    expect(slave.stats().ha.slave?.notConnectedReason).toMatch(/cannot append/)
    // What it has is served (once dispatched: the slave dispatches after it appends).
    await waitFor(() => slave.getMessage('g', 'orders', 0, 0, 8).messages.length > 0, 'the slave to serve what it has')
    mountTmpfs(slaveDir, '8m', true)
    await waitFor(() => caughtUp(slave, end), 'the slave to catch up', 60_000)
    expect(slave.stats().ha.slave?.status).toBe('replicating')
    expect(commitLogBytes(slaveDir, 0, end).equals(commitLogBytes(masterDir, 0, end))).toBe(true)
    expect(slave.getMaxOffsetInQueue('audit', 3)).toBe(master.getMaxOffsetInQueue('audit', 3))
  })
})
