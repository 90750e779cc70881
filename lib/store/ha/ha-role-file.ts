// config/haRole.json: the replication role a store last ran with, for `mqstore inspect` (the role
// is an open() option, not a property of the files). Written at open by a store that replicates
// (a SLAVE, a SYNC_MASTER, or a master with an HA port); removed by one that does not.
import * as fs from 'node:fs'
import { dirname } from 'node:path'
import { type BrokerRole, formatAddress, type HaConfig } from './ha-options.js'

export interface HaRoleRecord {
  brokerRole: BrokerRole
  /** A slave's master, 'host:port'. */
  haMasterAddress?: string
  /** A master's HA port as bound, 'host:port'. */
  haListen?: string
}

export function writeHaRole(path: string, config: HaConfig, port: number | null): void {
  const replicates = config.brokerRole !== 'ASYNC_MASTER' || port !== null
  if (!replicates) {
    // Asked first: most stores never wrote one, and a removal of nothing costs more than the question.
    if (fs.existsSync(path)) fs.rmSync(path, { force: true })
    return
  }
  const master = config.haMasterAddress
  const record: HaRoleRecord = {
    brokerRole: config.brokerRole,
    ...(master === null ? {} : { haMasterAddress: formatAddress(master) }),
    ...(port === null ? {} : { haListen: `${config.haListenHost}:${port}` }),
  }
  fs.mkdirSync(dirname(path), { recursive: true })
  fs.writeFileSync(path, `${JSON.stringify(record)}\n`)
}

/** The role on record; a store without the file ran as a plain ASYNC_MASTER. Null when unreadable. */
export function readHaRole(path: string): HaRoleRecord | null {
  let text: string
  try {
    text = fs.readFileSync(path, 'utf8')
  } catch {
    return { brokerRole: 'ASYNC_MASTER' }
  }
  try {
    const record = JSON.parse(text) as HaRoleRecord
    return typeof record?.brokerRole === 'string' ? record : null
  } catch {
    return null
  }
}
