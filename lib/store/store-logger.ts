// The store's logger. The `logger` option takes either a function of (level, message) or a
// pino-compatible object (level methods and child loggers; console also fits). Open normalises
// it once into a StoreLog, the function every service calls, so no call site knows which form the
// program gave. Without the option the store is silent.
import type { LevelLogger, LogFunction, LogLevel } from './types.js'

/** What the services call; `child` names the service logging (cleanup, recovery, flush, dispatch). */
export interface StoreLog {
  (level: LogLevel, message: string): void
  child(component: string): StoreLog
}

const LEVEL_METHODS = ['debug', 'info', 'warn', 'error'] as const

/**
 * Normalises the `logger` option. Throws a TypeError for anything that is neither form, at open
 * rather than at the first message. A logger that throws is ignored for that message: a broken
 * logger must not fail a put or stop a background service.
 */
export function createStoreLog(logger: unknown): StoreLog {
  if (logger === undefined || logger === null) return silentLog
  if (typeof logger === 'function') return fromFunction(logger as LogFunction)
  if (isLevelLogger(logger)) return fromLevelLogger(logger)
  throw new TypeError('logger must be a function (level, message) or an object with debug, info, warn and error methods')
}

function isLevelLogger(value: unknown): value is LevelLogger {
  if (typeof value !== 'object') return false
  const candidate = value as Record<string, unknown>
  if (!LEVEL_METHODS.every((level) => typeof candidate[level] === 'function')) return false
  return candidate.child === undefined || typeof candidate.child === 'function'
}

const silentLog: StoreLog = Object.assign((_level: LogLevel, _message: string) => {}, {
  child: (_component: string) => silentLog,
})

function fromFunction(fn: LogFunction): StoreLog {
  // The function form has no bindings; every message already names what it is about.
  const log: StoreLog = Object.assign(
    (level: LogLevel, message: string) => {
      try {
        fn(level, message)
      } catch {
        // See createStoreLog: a throwing logger loses its message, nothing else.
      }
    },
    { child: (_component: string) => log },
  )
  return log
}

function fromLevelLogger(logger: LevelLogger): StoreLog {
  return Object.assign(
    (level: LogLevel, message: string) => {
      try {
        // A method call, so that pino (and console) keep their `this`.
        logger[level](message)
      } catch {
        // See createStoreLog.
      }
    },
    {
      child: (component: string) =>
        typeof logger.child === 'function' ? fromLevelLogger(logger.child({ component })) : fromLevelLogger(logger),
    },
  )
}
