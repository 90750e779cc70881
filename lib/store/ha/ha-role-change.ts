// setBrokerRole on a live store (docs/api.md, "Failover by hand"): promotes a slave to a master,
// or turns a master (or a slave) into the slave of another master. Changes run one at a time.
import { MQStoreError } from '../../errors.js'
import { resetQueueOffsets } from '../recovery/store-recovery.js'
import type { StoreLog } from '../store-logger.js'
import { cutCompactionLogs, cutLog, type LogCutHost, lastRecordBoundary } from './ha-log-cut.js'
import { type BrokerRole, invalid, parseMasterAddress, ROLES } from './ha-options.js'
import type { HaService } from './ha-service.js'

export interface SetBrokerRoleOptions {
  /** The new master, 'host:port': required for 'SLAVE', refused for the master roles. */
  haMasterAddress?: string
  /**
   * When the log holds bytes the new master does not have, cut it back to the last record
   * boundary they share instead of refusing to replicate. Default false.
   */
  truncateToMaster?: boolean
}

export interface RoleChangeHost extends LogCutHost {
  readonly ha: HaService
  readonly log: StoreLog
  /** Throws when the store is closed. */
  assertOpen(): void
  /** Starts delivering due delayed messages (a master's job; a slave gets them from its master). */
  startSchedule(): void
  /** Stops that delivery. */
  stopSchedule(): Promise<void>
}

export async function setBrokerRole(host: RoleChangeHost, role: BrokerRole, options: SetBrokerRoleOptions = {}): Promise<void> {
  const { master, truncateToMaster } = checkArguments(host, role, options)
  await host.ha.change(() =>
    master === null ? promote(host, role as 'ASYNC_MASTER' | 'SYNC_MASTER') : follow(host, master, truncateToMaster),
  )
}

function checkArguments(
  host: RoleChangeHost,
  role: unknown,
  options: unknown,
): { master: { host: string; port: number } | null; truncateToMaster: boolean } {
  host.assertOpen()
  if (!ROLES.includes(role as BrokerRole)) throw invalid('brokerRole', `one of ${ROLES.join(', ')}`, role)
  if (options === null || typeof options !== 'object') throw new MQStoreError('INVALID_OPTION', 'setBrokerRole options must be an object')
  const { haMasterAddress, truncateToMaster, ...unknown } = options as SetBrokerRoleOptions & Record<string, unknown>
  const extra = Object.keys(unknown)
  if (extra.length > 0) throw new MQStoreError('INVALID_OPTION', `unknown setBrokerRole option '${extra[0]}'`)
  if (truncateToMaster !== undefined && typeof truncateToMaster !== 'boolean')
    throw invalid('truncateToMaster', 'a boolean', truncateToMaster)
  if (role !== 'SLAVE') {
    if (haMasterAddress !== undefined)
      throw new MQStoreError('INVALID_OPTION', `option 'haMasterAddress' is for brokerRole 'SLAVE', not '${role}'`)
    if (truncateToMaster !== undefined)
      throw new MQStoreError('INVALID_OPTION', `option 'truncateToMaster' is for brokerRole 'SLAVE', not '${role}'`)
    if (role === 'SYNC_MASTER' && host.ha.config.haListenPort === null) {
      throw new MQStoreError(
        'INVALID_OPTION',
        "option 'haListenPort' must be given at open for brokerRole 'SYNC_MASTER' (its puts wait for a slave)",
      )
    }
    return { master: null, truncateToMaster: false }
  }
  if (haMasterAddress === undefined)
    throw new MQStoreError('INVALID_OPTION', "option 'haMasterAddress' is required with brokerRole 'SLAVE'")
  return { master: parseMasterAddress(haMasterAddress), truncateToMaster: truncateToMaster === true }
}

/**
 * A slave becomes a master: replication stops, dispatch finishes what it holds, a torn tail that
 * no frame will complete is cut as recovery cuts it, and puts take the log's end and the queues'
 * ends. A master changing between ASYNC_MASTER and SYNC_MASTER only changes how puts wait.
 */
async function promote(host: RoleChangeHost, role: 'ASYNC_MASTER' | 'SYNC_MASTER'): Promise<void> {
  const { ha, commitLog, dispatcher } = host
  const wasSlave = ha.role === 'SLAVE'
  if (wasSlave) {
    // Puts stay refused (the role is still SLAVE) until the log's end is settled.
    await ha.stopReplicating()
    dispatcher.doReput()
    await dispatcher.settle()
    const max = commitLog.getMaxOffset()
    const from = Math.max(dispatcher.reputFromOffset, commitLog.getMinOffset())
    const end = from >= max ? max : lastRecordBoundary(commitLog, from, max)
    if (end < max) {
      host.log('warn', `promotion: cut the torn tail from ${end} to ${max}, which no frame from the old master will complete`)
    }
    dispatcher.holdIncompleteTail = false
    cutLog(host, end)
    // Dispatch filled the queues, not the next offsets puts take (set at open, or never).
    resetQueueOffsets(commitLog, host.queues)
  }
  try {
    await ha.becomeMaster(role)
  } finally {
    if (wasSlave) host.startSchedule()
  }
  host.log('info', `the store is now ${role}${wasSlave ? `; it takes puts from commit-log offset ${commitLog.getMaxOffset()}` : ''}`)
}

/** The store becomes the slave of `master`, comparing its log with the master's before it appends. */
async function follow(host: RoleChangeHost, master: { host: string; port: number }, truncateToMaster: boolean): Promise<void> {
  const { ha, dispatcher } = host
  if (ha.role !== 'SLAVE') await host.stopSchedule()
  dispatcher.holdIncompleteTail = true
  const truncate = async (offset: number): Promise<void> => {
    cutLog(host, offset)
    await cutCompactionLogs(host)
  }
  await ha.becomeSlave(master, { truncateToMaster, truncate })
  host.log('info', `the store is now a SLAVE of ${master.host}:${master.port}${truncateToMaster ? ' (truncateToMaster)' : ''}`)
}
