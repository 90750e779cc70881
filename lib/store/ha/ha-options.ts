// The replication options, with RocketMQ's names, checked apart from the store's file and flush
// settings (config.ts): several have no default (a master listens only when given a port).
import { isIP } from 'node:net'
import { MQStoreError } from '../../errors.js'

export type BrokerRole = 'ASYNC_MASTER' | 'SYNC_MASTER' | 'SLAVE'

/** What open() takes for replication (docs/api.md, "Replication"). */
export interface HaOptions {
  /** 'ASYNC_MASTER' (default), 'SYNC_MASTER' (a put waits for a slave) or 'SLAVE'. */
  brokerRole?: BrokerRole
  /**
   * A master listens for slaves only when this is given; 0 picks a free port (stats().ha.port).
   * A SLAVE does not listen: its port is used once setBrokerRole promotes it.
   */
  haListenPort?: number
  /** Where a master listens; default '127.0.0.1'. */
  haListenHost?: string
  /** When given, a master closes connections from any other IP address. */
  haAllowedAddresses?: string[]
  /** A slave's master, 'host:port'. */
  haMasterAddress?: string
  /** How often a slave reports and an idle master sends a heartbeat, ms. Default 5,000. */
  haSendHeartbeatInterval?: number
  /** A master closes a connection it read nothing from for this long, ms. Default 20,000. */
  haHousekeepingInterval?: number
  /** The largest frame body a master sends, bytes. Default 32 KiB. */
  haTransferBatchSize?: number
  /** SYNC_MASTER: SLAVE_NOT_AVAILABLE when the best slave is further behind than this. Default 256 MiB. */
  haSlaveFallbehindMax?: number
}

export interface HaConfig {
  brokerRole: BrokerRole
  haListenPort: number | null
  haListenHost: string
  haAllowedAddresses: string[] | null
  haMasterAddress: { host: string; port: number } | null
  haSendHeartbeatInterval: number
  haHousekeepingInterval: number
  haTransferBatchSize: number
  haSlaveFallbehindMax: number
}

export const HA_OPTION_NAMES = [
  'brokerRole',
  'haListenPort',
  'haListenHost',
  'haAllowedAddresses',
  'haMasterAddress',
  'haSendHeartbeatInterval',
  'haHousekeepingInterval',
  'haTransferBatchSize',
  'haSlaveFallbehindMax',
] as const

export const ROLES: readonly BrokerRole[] = ['ASYNC_MASTER', 'SYNC_MASTER', 'SLAVE']

export function invalid(name: string, must: string, value: unknown): MQStoreError {
  return new MQStoreError('INVALID_OPTION', `option '${name}' must be ${must}, got ${JSON.stringify(value) ?? String(value)}`)
}

function integer(name: string, value: unknown, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw invalid(name, `an integer in ${min}..${max}`, value)
  }
  return value
}

/** 'host:port', with an IPv6 host in brackets. */
export function formatAddress(address: { host: string; port: number } | null): string {
  if (address === null) return 'no master'
  return `${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`
}

/** 'host:port' or '[ipv6]:port' with a port in 1..65535. */
export function parseMasterAddress(text: unknown): { host: string; port: number } {
  const match = typeof text === 'string' ? /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(text) : null
  const port = match === null ? 0 : Number(match[3])
  if (match === null || port < 1 || port > 65535) throw invalid('haMasterAddress', "'host:port'", text)
  return { host: match[1] ?? match[2], port }
}

/** Takes the replication options out of `options`: the checked settings, and the other options. */
export function splitHaOptions<T extends object>(options: T & HaOptions): { ha: HaConfig; rest: Omit<T, keyof HaOptions> } {
  const rest: Record<string, unknown> = { ...(options as Record<string, unknown>) }
  for (const name of HA_OPTION_NAMES) delete rest[name]
  const role = options.brokerRole ?? 'ASYNC_MASTER'
  if (!ROLES.includes(role)) throw invalid('brokerRole', `one of ${ROLES.join(', ')}`, role)
  const host = options.haListenHost ?? '127.0.0.1'
  if (typeof host !== 'string' || isIP(host) === 0) throw invalid('haListenHost', 'an IP address', host)
  const allowed = options.haAllowedAddresses
  if (allowed !== undefined && (!Array.isArray(allowed) || allowed.some((ip) => typeof ip !== 'string' || isIP(ip) === 0))) {
    throw invalid('haAllowedAddresses', 'an array of IP addresses', allowed)
  }
  const port = options.haListenPort === undefined ? null : integer('haListenPort', options.haListenPort, 0, 0, 65535)
  const master = options.haMasterAddress === undefined ? null : parseMasterAddress(options.haMasterAddress)
  if (role === 'SLAVE' && master === null) {
    throw new MQStoreError('INVALID_OPTION', "option 'haMasterAddress' is required with brokerRole 'SLAVE'")
  }
  if (role === 'SYNC_MASTER' && port === null) {
    throw new MQStoreError('INVALID_OPTION', "option 'haListenPort' is required with brokerRole 'SYNC_MASTER' (its puts wait for a slave)")
  }
  const ha: HaConfig = {
    brokerRole: role,
    haListenPort: port,
    haListenHost: host,
    haAllowedAddresses: allowed === undefined ? null : [...allowed],
    haMasterAddress: master,
    haSendHeartbeatInterval: integer('haSendHeartbeatInterval', options.haSendHeartbeatInterval, 5_000, 1),
    haHousekeepingInterval: integer('haHousekeepingInterval', options.haHousekeepingInterval, 20_000, 1),
    haTransferBatchSize: integer('haTransferBatchSize', options.haTransferBatchSize, 32 * 1024, 1, 4 * 1024 * 1024 - 12),
    haSlaveFallbehindMax: integer('haSlaveFallbehindMax', options.haSlaveFallbehindMax, 256 * 1024 * 1024, 1),
  }
  return { ha, rest: rest as Omit<T, keyof HaOptions> }
}
