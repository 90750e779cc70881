// `mqstore get <dir> --offset N` and `mqstore get <dir> --topic T --key K`: prints the message at
// a commit-log offset, or every message of a topic carrying a key, read-only.
import type { DecodedMessage } from '../store/commitlog/record.js'
import { CliError, EXIT, intOption, stringOption, UsageError, type Command } from './frame.js'
import { StoreReader } from './store-reader.js'
import { binaryOption, messageJson, messageLine } from './tail.js'

/** Messages of `topic` with `key`: through the index, or by reading the topic's queues. */
function findByKey(
  reader: StoreReader,
  topic: string,
  key: string,
  dims: { maxHashSlotNum: number; maxIndexNum: number }[],
): DecodedMessage[] {
  const offsets = reader.lookupKey(topic, key, dims)
  const carries = (m: DecodedMessage | null): m is DecodedMessage =>
    m !== null && m.topic === topic && (m.keys.includes(key) || m.properties.UNIQ_KEY === key)
  if (offsets !== null) return offsets.map((offset) => reader.readMessage(offset)).filter(carries)
  // Index files of dimensions we cannot tell: read every message of the topic instead.
  const found: DecodedMessage[] = []
  for (const queue of reader.queues().filter((q) => q.topic === topic)) {
    const max = reader.maxOffset(queue)
    for (let position = reader.minOffset(queue); position < max; ) {
      const units = reader.readUnits(queue, position, 1024)
      if (units.length === 0) break
      for (const unit of units) {
        const message = reader.readMessage(unit.commitLogOffset)
        if (carries(message)) found.push(message)
      }
      position = units[units.length - 1].queueOffset + 1
    }
  }
  return found.sort((a, b) => a.commitLogOffset - b.commitLogOffset)
}

export const getCommand: Command = {
  name: 'get',
  summary: 'print one message by commit-log offset, or the messages with a key (read-only)',
  synopsis: 'get <dir> (--offset N | --topic T --key K)',
  description: `--offset N prints the message whose record starts at commit-log offset N (as a put result's
wroteOffset or a message's commitLogOffset gives it). --topic T --key K prints every message of
topic T carrying key K (one of its keys, or its UNIQ_KEY), oldest first, found through the hash
index. The index dimensions are told from the files' size; give --max-hash-slot-num and
--max-index-num for a store sized otherwise (without them the topic's queues are read instead).

Read-only: works on a store another process has open. Exit code 4 when nothing is found.`,
  positionals: [1, 1],
  options: {
    offset: { type: 'string', value: 'N', description: 'commit-log offset of the message' },
    topic: { type: 'string', value: 'T', description: 'topic of the key' },
    key: { type: 'string', value: 'K', description: 'message key (KEYS or UNIQ_KEY)' },
    binary: { type: 'string', value: 'hex|base64', description: 'encoding of bodies that are not UTF-8 (default base64)' },
    'max-hash-slot-num': { type: 'string', value: 'N', description: "the store's maxHashSlotNum (with --max-index-num)" },
    'max-index-num': { type: 'string', value: 'N', description: "the store's maxIndexNum (with --max-hash-slot-num)" },
  },
  async run(ctx) {
    const offset = intOption(ctx.values, 'offset')
    const topic = stringOption(ctx.values, 'topic')
    const key = stringOption(ctx.values, 'key')
    const encoding = binaryOption(ctx)
    if ((offset === undefined) === (key === undefined)) throw new UsageError('give either --offset N, or --topic T and --key K')
    if (key !== undefined && (topic === undefined || topic === '')) throw new UsageError('--key needs --topic')
    const slots = intOption(ctx.values, 'max-hash-slot-num', 1)
    const entries = intOption(ctx.values, 'max-index-num', 2)
    if ((slots === undefined) !== (entries === undefined))
      throw new UsageError('give both --max-hash-slot-num and --max-index-num, or neither')
    using reader = StoreReader.open(ctx.positionals[0])
    const dims = slots === undefined ? [] : [{ maxHashSlotNum: slots, maxIndexNum: entries! }]
    const messages = offset !== undefined ? [reader.readMessage(offset)].filter((m) => m !== null) : findByKey(reader, topic!, key!, dims)
    if (ctx.json) ctx.emitJson(messages.map((m) => messageJson(m, encoding)))
    else for (const m of messages) ctx.line(messageLine(m, encoding))
    if (messages.length === 0) {
      const what = offset !== undefined ? `no message starts at commit-log offset ${offset}` : `no message of topic ${topic} has key ${key}`
      if (ctx.json) ctx.err.write(`mqstore get: ${what}\n`)
      else throw new CliError(what, EXIT.NOT_FOUND)
      return EXIT.NOT_FOUND
    }
    return EXIT.OK
  },
}
