// What a message says about itself, read through every field but its body: two reads of the
// same records agree on this whatever path served them.
import type { MessageExt } from '../../lib/store/types.js'

export function fieldsOf(m: MessageExt) {
  return {
    topic: m.topic,
    queueId: m.queueId,
    queueOffset: m.queueOffset,
    commitLogOffset: m.commitLogOffset,
    storeSize: m.storeSize,
    keys: m.keys,
    tags: m.tags,
    properties: { ...m.properties },
    storeTimestamp: m.storeTimestamp,
    bornTimestamp: m.bornTimestamp,
    msgId: m.msgId,
    bodyCRC: m.bodyCRC,
    sysFlag: m.sysFlag,
    bornHost: m.bornHost,
    storeHost: m.storeHost,
  }
}

/** fieldsOf with a copy of the body. */
export function fieldsAndBodyOf(m: MessageExt) {
  return { ...fieldsOf(m), body: Buffer.from(m.body) }
}
