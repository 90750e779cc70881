// Replication for one store (RocketMQ's HAService): by role, a master's HA port and the waits of
// SYNC_MASTER puts (GroupTransferService), or a slave's link to its master.
import type { CommitLog, PutMessageResult } from '../commitlog/commit-log.js'
import type { StoreLog } from '../store-logger.js'
import { HaMaster } from './ha-master.js'
import type { BrokerRole, HaConfig } from './ha-options.js'
import { writeHaRole } from './ha-role-file.js'
import { HaSlave } from './ha-slave.js'
import type { HaStats } from './ha-stats.js'

export type SlaveWaitStatus = 'PUT_OK' | 'FLUSH_SLAVE_TIMEOUT' | 'SLAVE_NOT_AVAILABLE'

interface SlaveWait {
  end: number
  resolve: (status: SlaveWaitStatus) => void
  timer: NodeJS.Timeout
}

export class HaService {
  readonly master: HaMaster | null
  readonly slave: HaSlave | null
  /** Put batches waiting for a slave to acknowledge their end. */
  private readonly waits: SlaveWait[] = []

  constructor(
    readonly config: HaConfig,
    commitLog: CommitLog,
    log: StoreLog,
    private readonly syncFlushTimeout: number,
    onAppended: () => void,
    private readonly roleFile: string,
  ) {
    const isSlave = config.brokerRole === 'SLAVE'
    this.slave = isSlave ? new HaSlave(commitLog, config, log, onAppended) : null
    this.master = !isSlave && config.haListenPort !== null ? new HaMaster(commitLog, config, log, (acked) => this.acked(acked)) : null
  }

  get role(): BrokerRole {
    return this.config.brokerRole
  }

  /** Why puts are refused by the role, or null. */
  refusesPuts(): string | null {
    return this.config.brokerRole === 'SLAVE' ? `the store is a SLAVE of ${this.slave?.stats().masterAddress}; put to its master` : null
  }

  async start(): Promise<void> {
    if (this.master !== null) await this.master.listen()
    writeHaRole(this.roleFile, this.config, this.master?.port ?? null)
    this.slave?.start()
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
    return {
      role: this.config.brokerRole,
      host: master === null ? null : this.config.haListenHost,
      port: master === null ? null : master.port,
      connections: master?.stats() ?? [],
      closedConnections: master === null ? [] : [...master.closedConnections],
      slaveAckOffset: master?.slaveAckOffset ?? 0,
      slave: this.slave?.stats() ?? null,
    }
  }

  async close(): Promise<void> {
    for (const wait of this.waits.splice(0)) {
      clearTimeout(wait.timer)
      wait.resolve('FLUSH_SLAVE_TIMEOUT')
    }
    await this.master?.close()
    await this.slave?.stop()
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
