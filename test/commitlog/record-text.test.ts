// Topics read from record bytes: recognised again a word at a time (readTopic with a DataView),
// never mistaken for another topic that shares their length and their first and last bytes.
import { describe, expect, it } from 'vitest'

import { javaStringHashCode } from '../../lib/store/bytes.js'
import { readTopic } from '../../lib/store/commitlog/record-text.js'

/** `topic` at an odd position of a larger buffer, with its DataView. */
function placed(topic: string, at = 3): { buf: Buffer; dv: DataView } {
  const bytes = Buffer.from(topic)
  const buf = Buffer.alloc(at + bytes.length + 5, 0x7a)
  bytes.copy(buf, at)
  return { buf, dv: new DataView(buf.buffer, buf.byteOffset, buf.byteLength) }
}

function read(topic: string, withView: boolean): { text: string; hash: number } {
  const { buf, dv } = placed(topic)
  const found = readTopic(buf, 3, Buffer.byteLength(topic), withView ? dv : undefined)
  return { text: found.text, hash: found.hash }
}

describe('readTopic', () => {
  it('reads every length, with and without a DataView, the same text and Java hash', () => {
    for (const topic of ['a', 'ab', 'abc', 'abcd', 'abcde', 'TopicTest', 'BenchTopic0', 'x'.repeat(127), '%RETRY%group-1', 'tópico-ü']) {
      for (let round = 0; round < 3; round++) {
        for (const withView of [true, false]) {
          expect(read(topic, withView)).toEqual({ text: topic, hash: javaStringHashCode(topic) })
        }
      }
    }
  })

  it('tells apart topics of one length that share their first and last four bytes', () => {
    const topics: string[] = []
    for (let k = 0; k < 40; k++) topics.push(`head${String.fromCharCode(65 + (k % 26))}${k % 3}mid${k}tail`.padEnd(20, '_').slice(0, 20))
    // The same first four and last four bytes, one byte different in the middle.
    topics.push('headXXXXXXXXXXXXtail', 'headXXXXXXYXXXXXtail', 'headXXXXXXXXXXXYtail', 'headYXXXXXXXXXXXtail')
    for (let round = 0; round < 4; round++) {
      for (const topic of round % 2 === 0 ? topics : [...topics].reverse()) {
        expect(read(topic, true).text).toBe(topic)
      }
    }
  })

  it('returns the interned object again for the same bytes', () => {
    const first = placed('OrdersTopic')
    const second = placed('OrdersTopic', 17)
    const a = readTopic(first.buf, 3, 11, first.dv)
    const b = readTopic(second.buf, 17, 11, second.dv)
    expect(b).toBe(a)
    expect(a.invalidReason()).toBeNull()
  })
})
