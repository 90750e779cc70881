// What a TypeScript user of the package sees: the exported types, read-only results, filters that
// take the same shapes everywhere, and docs that list every status. The type assertions are
// checked by `tsc` in `npm test`; the runtime ones by vitest.
import * as fs from 'node:fs'
import { afterEach, beforeEach, describe, expect, expectTypeOf, it } from 'vitest'

import {
  MessageStore,
  type CommitOptions,
  type GetMessageResult,
  type GetMessageStatus,
  type HostAddress,
  type MessageExt,
  type MessageStoreStats,
  type PutMessageStatus,
  type QueryMessageResult,
  type RecoveryOutcome,
  type StoreStats,
  type VerifyReport,
} from '../lib/index.js'
import { repoRoot, tempDir } from './helpers/tmp.js'

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-types-')
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

const apiDoc = () => fs.readFileSync(`${repoRoot}docs/api.md`, 'utf8')

/** The string members of a union type as written in a source file. */
function unionMembers(source: string, typeName: string): string[] {
  const match = new RegExp(`export type ${typeName} =([^]*?)\\n\\n`).exec(source)
  expect(match).not.toBeNull()
  return [...match![1].matchAll(/'([A-Z_]+)'/g)].map((m) => m[1])
}

describe('public types', () => {
  it('exports the types its results are made of, and stats() is the complete MessageStoreStats', async () => {
    expectTypeOf<RecoveryOutcome>().toHaveProperty('processOffset')
    expectTypeOf<HostAddress>().toHaveProperty('port')
    expectTypeOf<VerifyReport>().not.toBeAny()
    expectTypeOf<MessageStoreStats>().toMatchTypeOf<Readonly<StoreStats>>()
    expectTypeOf<CommitOptions>().toEqualTypeOf<{ durable?: boolean }>()
    expectTypeOf<MessageExt['body']>().toEqualTypeOf<Buffer>()
    const store = await MessageStore.open(dir)
    try {
      const stats = store.stats()
      expectTypeOf(stats).toEqualTypeOf<MessageStoreStats>()
      expect(stats.recovery).not.toBeUndefined()
      expect(typeof stats.putMessageTimesTotal).toBe('number')
      expect(Array.isArray(stats.repairs)).toBe(true)
    } finally {
      await store.close()
    }
  })

  it('results are read-only to the compiler', async () => {
    const store = await MessageStore.open(dir)
    try {
      const put = await store.putMessage({ topic: 't', body: 'x' })
      const got: GetMessageResult = store.getMessage('g', 't', 0, 0, 8)
      const byKey: QueryMessageResult = store.queryMessage('t', 'k', 8)
      const mutate = (): void => {
        // @ts-expect-error a put result is read-only
        put.status = 'PUT_OK'
        // @ts-expect-error a get result is read-only
        got.status = 'FOUND'
        // @ts-expect-error its messages are a read-only array
        got.messages.push(got.messages[0])
        // @ts-expect-error and each message is read-only
        got.messages[0].queueOffset = 5
        // @ts-expect-error a query result is read-only
        byKey.messages.length = 0
      }
      expect(typeof mutate).toBe('function')
      expect(got.messages).toHaveLength(1)
      expect(put.status).toBe('PUT_OK')
    } finally {
      await store.close()
    }
  })

  it('consume() takes every filter shape getMessage takes', async () => {
    const store = await MessageStore.open(dir)
    try {
      await store.putMessages(['a', 'b', 'c', 'a'].map((tags, i) => ({ topic: 't', body: `${tags}${i}`, tags })))
      const filters = ['a || b', ['a', 'b'], { tags: ['a', 'b'] }, { tags: 'a || b' }] as const
      for (const tags of filters) {
        expect(store.getMessage('g', 't', 0, 0, 8, tags).messages.map((m) => m.body.toString())).toEqual(['a0', 'b1', 'a3'])
        const seen: string[] = []
        for await (const m of store.consume({ group: 'g', topic: 't', queueId: 0, from: 'earliest', tags })) {
          seen.push(m.body.toString())
          if (seen.length === 3) break
        }
        expect(seen).toEqual(['a0', 'b1', 'a3'])
      }
    } finally {
      await store.close()
    }
  })
})

describe('docs that match', () => {
  it('the API doc lists every GetMessageStatus and PutMessageStatus value', () => {
    expectTypeOf<'NO_MATCHED_LOGIC_QUEUE'>().toMatchTypeOf<GetMessageStatus>()
    expectTypeOf<'CREATE_MAPEDFILE_FAILED'>().toMatchTypeOf<PutMessageStatus>()
    const get = unionMembers(fs.readFileSync(`${repoRoot}lib/store/types.ts`, 'utf8'), 'GetMessageStatus')
    const put = unionMembers(fs.readFileSync(`${repoRoot}lib/store/commitlog/put-message-result.ts`, 'utf8'), 'PutMessageStatus')
    expect(get).toHaveLength(9)
    expect(put).toHaveLength(10)
    const doc = apiDoc()
    for (const status of [...get, ...put]) expect(doc, status).toContain(`\`${status}\``)
  })

  it('the `await using` example says which Node versions parse it', () => {
    const doc = apiDoc()
    const section = doc.slice(doc.indexOf('await using'))
    expect(section).toMatch(/Node 20/)
    expect(section).toMatch(/Node 24/)
  })

  it('the package declares @types/node for Buffer in its typings, and the typings reference it', () => {
    const pkg = JSON.parse(fs.readFileSync(`${repoRoot}package.json`, 'utf8'))
    expect(pkg.peerDependencies['@types/node']).toBe('>=20')
    expect(pkg.peerDependenciesMeta['@types/node'].optional).toBe(true)
    expect(fs.readFileSync(`${repoRoot}lib/index.ts`, 'utf8')).toContain('/// <reference types="node" preserve="true" />')
  })
})
