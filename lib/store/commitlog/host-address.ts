// Host addresses in commit-log records: the born host (producer) and the store host, each the
// address bytes (4 for IPv4, 16 for IPv6) then the port as an int32. The record's sysFlag says which
// width each field has (SysFlag.BORNHOST_V6 / STOREHOST_V6). Also the hex used in message ids.
import { isIPv4, isIPv6 } from 'node:net'

export const IPV4_ADDRESS_LENGTH = 4
export const IPV6_ADDRESS_LENGTH = 16
export const PORT_LENGTH = 4
export const IPV4_HOST_LENGTH = IPV4_ADDRESS_LENGTH + PORT_LENGTH // 8
export const IPV6_HOST_LENGTH = IPV6_ADDRESS_LENGTH + PORT_LENGTH // 20

export interface HostAddress {
  /** An IPv4 dotted quad or an IPv6 literal (an IPv4-mapped IPv6 address is stored as IPv4). */
  address: string
  port: number
}

/** A parsed IP address as big-endian int32 words: one word for IPv4, four for IPv6. */
export interface Ip {
  readonly v6: boolean
  readonly w0: number
  readonly w1: number
  readonly w2: number
  readonly w3: number
  /** Upper-case hex of the address bytes, the first part of a msgId. */
  readonly hex: string
}

// The caches below are module-level and shared by every store in the process. That is safe: they
// map address text to parsed words and back, hold nothing but strings and small frozen-shape
// objects built from them, never a buffer, and are bounded (cleared when full).
const MAX_HOST_CACHE = 1024
const hostCache = new Map<string, Ip>()

const HEX_BYTE: readonly string[] = Array.from({ length: 256 }, (_, b) => b.toString(16).toUpperCase().padStart(2, '0'))

/** Upper-case hex of an int32 as 8 digits. */
export function hex8(word: number): string {
  return HEX_BYTE[(word >>> 24) & 0xff] + HEX_BYTE[(word >>> 16) & 0xff] + HEX_BYTE[(word >>> 8) & 0xff] + HEX_BYTE[word & 0xff]
}

function makeIp(v6: boolean, w0: number, w1: number, w2: number, w3: number): Ip {
  const hex = v6 ? hex8(w0) + hex8(w1) + hex8(w2) + hex8(w3) : hex8(w0)
  return { v6, w0: w0 | 0, w1: w1 | 0, w2: w2 | 0, w3: w3 | 0, hex }
}

function dottedToWord(dotted: string): number {
  const p = dotted.split('.')
  return (Number(p[0]) << 24) | (Number(p[1]) << 16) | (Number(p[2]) << 8) | Number(p[3]) | 0
}

function hextetsOf(part: string): number[] {
  if (part === '') return []
  const out: number[] = []
  for (const g of part.split(':')) {
    if (g.includes('.')) {
      const w = dottedToWord(g)
      out.push(w >>> 16, w & 0xffff)
    } else {
      out.push(parseInt(g, 16))
    }
  }
  return out
}

/** Parses an address literal; null when it is neither IPv4 nor IPv6. */
function parseIp(address: string): Ip | null {
  if (isIPv4(address)) return makeIp(false, dottedToWord(address), 0, 0, 0)
  if (!isIPv6(address)) return null
  const zone = address.indexOf('%')
  const a = zone >= 0 ? address.slice(0, zone) : address
  const gap = a.indexOf('::')
  let h: number[]
  if (gap >= 0) {
    const head = hextetsOf(a.slice(0, gap))
    const tail = hextetsOf(a.slice(gap + 2))
    const zeros = 8 - head.length - tail.length
    if (zeros < 0) return null
    h = head.concat(new Array<number>(zeros).fill(0), tail)
  } else {
    h = hextetsOf(a)
  }
  if (h.length !== 8 || h.some((x) => !(x >= 0 && x <= 0xffff))) return null
  const w0 = (h[0] << 16) | h[1]
  const w1 = (h[2] << 16) | h[3]
  const w2 = (h[4] << 16) | h[5]
  const w3 = (h[6] << 16) | h[7]
  // Java turns an IPv4-mapped address (::ffff:a.b.c.d) into a 4-byte address; so do we, so that a
  // dual-stack socket's view of an IPv4 client encodes as RocketMQ would encode it.
  if (w0 === 0 && w1 === 0 && w2 === 0xffff) return makeIp(false, w3, 0, 0, 0)
  return makeIp(true, w0, w1, w2, w3)
}

// The two most recent lookups: usually the store host and the current born host.
let recentAddress0 = ''
let recentIp0: Ip | null = null
let recentAddress1 = ''
let recentIp1: Ip | null = null

export function ipOf(address: string): Ip | null {
  if (address === recentAddress0) return recentIp0
  if (address === recentAddress1) {
    const ip = recentIp1
    recentAddress1 = recentAddress0
    recentIp1 = recentIp0
    recentAddress0 = address
    recentIp0 = ip
    return ip
  }
  const ip = mapIpOf(address)
  if (ip !== null) {
    recentAddress1 = recentAddress0
    recentIp1 = recentIp0
    recentAddress0 = address
    recentIp0 = ip
  }
  return ip
}

function mapIpOf(address: string): Ip | null {
  let ip = hostCache.get(address)
  if (ip === undefined) {
    if (typeof address !== 'string') return null
    const parsed = parseIp(address)
    if (parsed === null) return null
    if (hostCache.size >= MAX_HOST_CACHE) hostCache.clear()
    hostCache.set(address, parsed)
    ip = parsed
  }
  return ip
}

/** A host as a put's `bornHost` takes it: `a.b.c.d:port`, or `[v6]:port`. */
export function hostText(host: HostAddress): string {
  return host.address.includes(':') ? `[${host.address}]:${host.port}` : `${host.address}:${host.port}`
}

export function validPort(port: number): boolean {
  return Number.isInteger(port) && port >= 0 && port <= 0xffff
}

export function formatIPv4(w: number): string {
  return `${w >>> 24}.${(w >>> 16) & 0xff}.${(w >>> 8) & 0xff}.${w & 0xff}`
}

/** RFC 5952 text: lower-case, longest run (≥ 2) of zero groups as '::', IPv4-mapped as dotted. */
export function formatIPv6(w0: number, w1: number, w2: number, w3: number): string {
  if (w0 === 0 && w1 === 0 && w2 === 0xffff) return `::ffff:${formatIPv4(w3)}`
  const h = [w0 >>> 16, w0 & 0xffff, w1 >>> 16, w1 & 0xffff, w2 >>> 16, w2 & 0xffff, w3 >>> 16, w3 & 0xffff]
  let bestStart = -1
  let bestLen = 1
  for (let i = 0; i < 8; ) {
    if (h[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && h[j] === 0) j++
    if (j - i > bestLen) {
      bestStart = i
      bestLen = j - i
    }
    i = j
  }
  const hex = (from: number, to: number): string =>
    h
      .slice(from, to)
      .map((x) => x.toString(16))
      .join(':')
  if (bestStart < 0) return hex(0, 8)
  return `${hex(0, bestStart)}::${hex(bestStart + bestLen, 8)}`
}

const ipv4TextCache = new Map<number, string>()

export function ipv4Text(w: number): string {
  let s = ipv4TextCache.get(w)
  if (s === undefined) {
    s = formatIPv4(w)
    if (ipv4TextCache.size >= MAX_HOST_CACHE) ipv4TextCache.clear()
    ipv4TextCache.set(w, s)
  }
  return s
}

/** Writes a host field (address words, then port); returns the offset after it. */
export function writeHost(dv: DataView, at: number, ip: Ip, port: number): number {
  dv.setInt32(at, ip.w0)
  if (!ip.v6) {
    dv.setInt32(at + IPV4_ADDRESS_LENGTH, port)
    return at + IPV4_HOST_LENGTH
  }
  dv.setInt32(at + 4, ip.w1)
  dv.setInt32(at + 8, ip.w2)
  dv.setInt32(at + 12, ip.w3)
  dv.setInt32(at + IPV6_ADDRESS_LENGTH, port)
  return at + IPV6_HOST_LENGTH
}

/** Reads a host field written by writeHost. */
export function readHost(dv: DataView, at: number, v6: boolean): HostAddress {
  const w0 = dv.getInt32(at)
  if (!v6) return { address: ipv4Text(w0), port: dv.getInt32(at + IPV4_ADDRESS_LENGTH) }
  return {
    address: formatIPv6(w0, dv.getInt32(at + 4), dv.getInt32(at + 8), dv.getInt32(at + 12)),
    port: dv.getInt32(at + IPV6_ADDRESS_LENGTH),
  }
}
