// Replication for one store (RocketMQ's HAService): by role, a master's HA port and the waits of
// SYNC_MASTER puts (GroupTransferService), or a slave's link to its master.
import { MQStoreError } from '../../errors.js'
import type { CommitLog, PutMessageResult } from '../commitlog/commit-log.js'
import type { StoreLog } from '../store-logger.js'
import { HaMaster } from './ha-master.js'
import { type BrokerRole, formatAddress, type HaConfig } from './ha-options.js'
import { writeHaRole } from './ha-role-file.js'
import { HaSlave, type SlaveVerify } from './ha-slave.js'
import type { HaStats } from './ha-stats.js'

export type SlaveWaitStatus = 'PUT_OK' | 'FLUSH_SLAVE_TIMEOUT' | 'SLAVE_NOT_AVAILABLE'

interface SlaveWait {
  end: number
  resolve: (status: SlaveWaitStatus) => void
  timer: NodeJS.Timeout
}

export class HaService {
  private currentMaster: HaMaster | null = null
  private currentSlave: HaSlave | null = null
  /** Put batches waiting for a slave to acknowledge their end. */
  private readonly waits: SlaveWait[] = []
  /** Reconnects of the slaves this store ran before a role change (stats and metrics count on). */
  private earlierReconnects = 0
  /** Role changes, one after another; close waits for the one under way. */
  private changes: Promise<void> = Promise.resolve()
  private closing = false

  constructor(
    readonly config: HaConfig,
    private readonly commitLog: CommitLog,
    private readonly log: StoreLog,
    private readonly syncFlushTimeout: number,
    private readonly onAppended: () => void,
    private readonly roleFile: string,
  ) {
    if (config.brokerRole === 'SLAVE') this.currentSlave = new HaSlave(commitLog, config, log, onAppended)
    else if (config.haListenPort !== null) this.currentMaster = this.newMaster()
  }

  get master(): HaMaster | null {
    return this.currentMaster
  }

  get slave(): HaSlave | null {
    return this.currentSlave
  }

  /** Reconnects of this store's slave links since open. */
  get slaveReconnects(): number {
    return this.earlierReconnects + (this.currentSlave?.reconnectCount ?? 0)
  }

  private newMaster(): HaMaster {
    return new HaMaster(this.commitLog, this.config, this.log, (acked) => this.acked(acked))
  }

  get role(): BrokerRole {
    return this.config.brokerRole
  }

  /** Why puts are refused by the role, or null. */
  refusesPuts(): string | null {
    return this.config.brokerRole === 'SLAVE'
      ? `the store is a SLAVE of ${formatAddress(this.config.haMasterAddress)}; put to its master`
      : null
  }

  async start(): Promise<void> {
    if (this.master !== null) await this.master.listen()
    writeHaRole(this.roleFile, this.config, this.master?.port ?? null)
    this.slave?.start()
  }

  /**
   * Becomes a master (role-change.ts did the log's part): the slave link ends, and a store given
   * haListenPort at open listens (again) for slaves.
   */
  async becomeMaster(role: 'ASYNC_MASTER' | 'SYNC_MASTER'): Promise<void> {
    await this.stopReplicating()
    this.config.brokerRole = role
    this.config.haMasterAddress = null
    // A port that cannot be bound does not undo the promotion (the log is the master's now): the
    // store takes puts without serving slaves, and the caller is told.
    let failure: unknown = null
    if (this.currentMaster === null && this.config.haListenPort !== null) {
      const master = this.newMaster()
      try {
        await master.listen()
        this.currentMaster = master
      } catch (error) {
        failure = error
        this.log('error', `the store is now ${role} but serves no slave: ${(error as Error).message}`)
      }
    }
    writeHaRole(this.roleFile, this.config, this.currentMaster?.port ?? null)
    if (failure !== null) throw failure
  }

  /**
   * Becomes the slave of `master`: SYNC_MASTER puts still waiting get SLAVE_NOT_AVAILABLE, the
   * HA port closes, and a link starts that first compares the log with the master's (`verify`).
   */
  async becomeSlave(master: { host: string; port: number }, verify: SlaveVerify): Promise<void> {
    this.failWaits('SLAVE_NOT_AVAILABLE')
    const server = this.currentMaster
    this.currentMaster = null
    await server?.close()
    await this.stopReplicating()
    this.config.brokerRole = 'SLAVE'
    this.config.haMasterAddress = master
    this.currentSlave = new HaSlave(this.commitLog, this.config, this.log, this.onAppended, verify)
    writeHaRole(this.roleFile, this.config, null)
    this.currentSlave.start()
  }

  /** Runs a role change after those before it; refused once the store is closing. */
  change(run: () => Promise<void>): Promise<void> {
    const next = this.changes.then(() => {
      if (this.closing) throw new MQStoreError('STORE_CLOSED', 'the store is closed')
      return run()
    })
    this.changes = next.catch(() => {})
    return next
  }

  /** Ends the slave link; the role stays until becomeMaster. */
  async stopReplicating(): Promise<void> {
    const slave = this.currentSlave
    if (slave === null) return
    this.currentSlave = null
    await slave.stop()
    this.earlierReconnects += slave.reconnectCount
  }

  private failWaits(status: SlaveWaitStatus): void {
    for (const wait of this.waits.splice(0)) {
      clearTimeout(wait.timer)
      wait.resolve(status)
    }
  }

  /** Puts appended bytes: the master's idle senders look again. */
  notifyAppended(): void {
    this.master?.notify()
  }

  /** SYNC_MASTER: whether a slave acknowledged `end`, in one wait for a whole put batch. */
  awaitSlave(end: number): Promise<SlaveWaitStatus> {
    const master = this.master
    if (master === null || master.reportingSlaves === 0) return Promise.resolve('SLAVE_NOT_AVAILABLE')
    if (end - master.slaveAckOffset >= this.config.haSlaveFallbehindMax) return Promise.resolve('SLAVE_NOT_AVAILABLE')
    if (master.slaveAckOffset >= end) return Promise.resolve('PUT_OK')
    return new Promise((resolve) => {
      const wait: SlaveWait = {
        end,
        resolve,
        timer: setTimeout(() => {
          const at = this.waits.indexOf(wait)
          if (at >= 0) this.waits.splice(at, 1)
          resolve('FLUSH_SLAVE_TIMEOUT')
        }, this.syncFlushTimeout),
      }
      this.waits.push(wait)
    })
  }

  private acked(offset: number): void {
    for (let i = this.waits.length - 1; i >= 0; i--) {
      const wait = this.waits[i]
      if (wait.end > offset) continue
      this.waits.splice(i, 1)
      clearTimeout(wait.timer)
      wait.resolve('PUT_OK')
    }
  }

  stats(): HaStats {
    const master = this.master
    const slave = this.slave
    return {
      role: this.config.brokerRole,
      host: master === null ? null : this.config.haListenHost,
      port: master === null ? null : master.port,
      connections: master?.stats() ?? [],
      closedConnections: master === null ? [] : [...master.closedConnections],
      slaveAckOffset: master?.slaveAckOffset ?? 0,
      slave: slave === null ? null : { ...slave.stats(), reconnects: this.slaveReconnects },
      reconnects: this.slaveReconnects,
    }
  }

  async close(): Promise<void> {
    this.closing = true
    await this.changes
    this.failWaits('FLUSH_SLAVE_TIMEOUT')
    await this.currentMaster?.close()
    await this.currentSlave?.stop()
  }
}

/** Gives the batch's appended puts the slave wait's status, with why. */
export function markUnreplicated(results: readonly PutMessageResult[], status: SlaveWaitStatus, syncFlushTimeout: number): void {
  const reason =
    status === 'SLAVE_NOT_AVAILABLE'
      ? 'appended, but no slave is connected or the best one is more than haSlaveFallbehindMax behind'
      : `appended, but no slave acknowledged it within syncFlushTimeout (${syncFlushTimeout} ms)`
  for (const r of results) if (r.status === 'PUT_OK') Object.assign(r, { status, reason })
}
