// The SYSFLAG field of a commit-log record (RocketMQ's MessageSysFlag): compression, multi-tags,
// the transaction type in bits 2-3, and the width of each host address. The one home of these bits.

export const SysFlag = {
  COMPRESSED: 0x1,
  MULTI_TAGS: 0x2,
  TRANSACTION_MASK: 0xc,
  TRANSACTION_NOT_TYPE: 0,
  TRANSACTION_PREPARED: 0x4,
  TRANSACTION_COMMIT: 0x8,
  TRANSACTION_ROLLBACK: 0xc,
  BORNHOST_V6: 0x10,
  STOREHOST_V6: 0x20,
} as const

/** The transaction type bits of a sysFlag (one of the TRANSACTION_* values). */
export function transactionType(sysFlag: number): number {
  return sysFlag & SysFlag.TRANSACTION_MASK
}

/**
 * True when a record with this sysFlag gets a queue offset and a consume-queue unit: ordinary and
 * committed messages. Prepared and rolled-back transaction halves never reach a consume queue.
 */
export function isQueuedRecord(sysFlag: number): boolean {
  const type = sysFlag & SysFlag.TRANSACTION_MASK
  return type === SysFlag.TRANSACTION_NOT_TYPE || type === SysFlag.TRANSACTION_COMMIT
}

/** True for a rolled-back transaction record: RocketMQ leaves it out of the index. */
export function isRolledBackRecord(sysFlag: number): boolean {
  return (sysFlag & SysFlag.TRANSACTION_MASK) === SysFlag.TRANSACTION_ROLLBACK
}
