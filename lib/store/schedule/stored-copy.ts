// The message that puts a stored record again, under another topic and queue: a due delayed
// message going to its real topic, a due timer, a nacked message going to its group's retry topic
// or dead-letter queue. What travels is what RocketMQ's redeliveries keep: the body as stored, the
// flag and sysFlag, the born time and host, and the properties and reconsume count the caller gives.
import { hostText } from '../commitlog/host-address.js'
import type { Message, MessageExt } from '../types.js'

export function storedCopy(
  record: MessageExt,
  topic: string,
  queueId: number,
  properties: Record<string, string>,
  reconsumeTimes: number = record.reconsumeTimes,
): Message {
  return {
    topic,
    queueId,
    body: record.body,
    properties,
    flag: record.flag,
    sysFlag: record.sysFlag,
    bornTimestamp: record.bornTimestamp,
    bornHost: hostText(record.bornHost),
    reconsumeTimes,
  }
}
