// Names inside a record: topics (RocketMQ's rule), offset message ids, and delay levels.
import { TWO_POW_32 } from '../bytes.js'
import { formatIPv4, formatIPv6, hex8, ipOf, validPort, type HostAddress } from './host-address.js'

export const MAX_TOPIC_LENGTH = 127
/** RocketMQ's default `messageDelayLevel`: level n (1-based) is the n-th item. */
export const DEFAULT_MESSAGE_DELAY_LEVEL = '1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h'

const TOPIC_CHARACTERS = /^[%|a-zA-Z0-9_-]+$/

/**
 * Null when the topic is valid, else why not. Valid: 1 to 127 characters from [%|a-zA-Z0-9_-]
 * (RocketMQ's rule). ASCII only, so the UTF-8 length equals the character count, and no '.' or
 * '/', so a topic can never name a path outside its consume-queue folder.
 */
export function validateTopic(topic: string): string | null {
  if (typeof topic !== 'string') return 'topic must be a string'
  if (topic.length === 0) return 'topic is empty'
  if (topic.length > MAX_TOPIC_LENGTH) {
    return `topic is ${topic.length} characters long, more than ${MAX_TOPIC_LENGTH}`
  }
  if (!TOPIC_CHARACTERS.test(topic)) return 'topic has characters other than letters, digits and %|_-'
  return null
}

/**
 * The offset message id: upper-case hex of store address ‖ port (int32) ‖ physical offset (int64);
 * 32 characters for an IPv4 store host, 56 for IPv6.
 */
export function createMsgId(storeHost: HostAddress, physicalOffset: number): string {
  const ip = ipOf(storeHost.address)
  if (ip === null) throw new RangeError(`not an IP address: ${JSON.stringify(storeHost.address)}`)
  if (!validPort(storeHost.port)) throw new RangeError(`invalid port ${storeHost.port}`)
  if (!Number.isSafeInteger(physicalOffset) || physicalOffset < 0) {
    throw new RangeError(`physical offset must be a non-negative safe integer, got ${physicalOffset}`)
  }
  return ip.hex + hex8(storeHost.port) + hex8(Math.floor(physicalOffset / TWO_POW_32)) + hex8(physicalOffset)
}

const MSG_ID_HEX = /^[0-9A-Fa-f]+$/

/** Inverse of createMsgId; RangeError when the text is not an offset message id. */
export function parseMsgId(msgId: string): { address: string; port: number; offset: number } {
  const v6 = msgId.length === 56
  if ((msgId.length !== 32 && !v6) || !MSG_ID_HEX.test(msgId)) {
    throw new RangeError(`not an offset message id: ${JSON.stringify(msgId)}`)
  }
  const word = (i: number): number => parseInt(msgId.slice(i * 8, i * 8 + 8), 16) | 0
  const address = v6 ? formatIPv6(word(0), word(1), word(2), word(3)) : formatIPv4(word(0))
  const at = v6 ? 4 : 1
  const port = word(at)
  const offset = word(at + 1) * TWO_POW_32 + (word(at + 2) >>> 0)
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new RangeError(`message id ${msgId} holds an offset outside the safe integer range`)
  }
  return { address, port, offset }
}

// ---------------------------------------------------------------------------------------------
// Delay levels

/**
 * Parses a `messageDelayLevel` string ("1s 5s 1m 2h …", units s, m, h, d) into milliseconds per
 * level: element i is level i + 1. RangeError on a malformed item.
 */
export function parseDelayLevels(spec: string): number[] {
  const unitMs: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
  const out: number[] = []
  for (const item of spec.split(' ')) {
    if (item === '') continue
    const unit = unitMs[item.slice(-1)]
    const count = item.slice(0, -1)
    if (unit === undefined || !/^\d+$/.test(count)) throw new RangeError(`bad delay level ${JSON.stringify(item)}`)
    out.push(Number(count) * unit)
  }
  return out
}

export const DEFAULT_DELAY_TABLE: readonly number[] = parseDelayLevels(DEFAULT_MESSAGE_DELAY_LEVEL)
