// config/haRole.json and `mqstore inspect`: the role a store last ran with.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, expect, it } from 'vitest'
import { formatInspect, inspectStore } from '../../lib/cli/inspect.js'
import { tempDir } from '../helpers/tmp.js'
import { caughtUp, closeAll, messages, openStore, waitFor } from './ha-helpers.js'

afterEach(closeAll)

it('records the role for inspect, and forgets it when the store runs as a plain master again', async () => {
  const masterDir = tempDir('mqstore-ha-role-')
  const master = await openStore(masterDir, { brokerRole: 'SYNC_MASTER', haListenPort: 0 })
  const port = master.stats().ha.port
  await master.putMessages(messages(1))
  expect(inspectStore(masterDir).role).toEqual({ brokerRole: 'SYNC_MASTER', haListen: `127.0.0.1:${port}` })
  expect(formatInspect(inspectStore(masterDir))).toContain(`role: SYNC_MASTER, serving slaves on 127.0.0.1:${port}`)
  const slaveDir = tempDir('mqstore-ha-role-')
  const slave = await openStore(slaveDir, { brokerRole: 'SLAVE', haMasterAddress: `127.0.0.1:${port}` })
  await waitFor(() => caughtUp(slave, master), 'the slave')
  expect(formatInspect(inspectStore(slaveDir))).toContain(`role: SLAVE, replicating from 127.0.0.1:${port}`)
  await slave.close()
  const plain = await openStore(slaveDir)
  expect(inspectStore(slaveDir).role).toEqual({ brokerRole: 'ASYNC_MASTER' })
  expect(formatInspect(inspectStore(slaveDir))).toContain('role: ASYNC_MASTER')
  await plain.close()
  fs.writeFileSync(join(slaveDir, 'config', 'haRole.json'), '{not json')
  expect(formatInspect(inspectStore(slaveDir))).toContain('role: unknown')
})
