// Copies many byte ranges out of one buffer into two, and checksums the ones a read serves, in one
// call (a read's records and their bodies).
#pragma once

#include <napi.h>

namespace mqnative {

// copyCrcRanges(src: Uint8Array, table: Float64Array, count: number, whole: Uint8Array | null,
//               part: Uint8Array, crcOut: Int32Array | null)
// Six table entries per k < count: [wholeStart, wholeLength, wholeAt, partStart, partLength,
// partAt]. Copies src[wholeStart, +wholeLength) to `whole` at wholeAt (unless whole is null), and
// src[partStart, +partLength) to `part` at partAt, setting crcOut[k] (when given) to crc32 of
// those bytes & 0x7fffffff (RocketMQ's BODYCRC) from the same pass over memory: a read's records
// and their bodies in one call. Every argument is checked before anything is written: a TypeError
// for a wrong type, a RangeError for a count past the arrays, a range outside src or its
// destination, a position that is not a non-negative integer, or a destination overlapping its
// source.
napi_value CopyCrcRanges(napi_env env, napi_callback_info info);

// prefetchRanges(src: Uint8Array, ranges: Float64Array, count: number)
// Asks the CPU to load the cache lines of src[ranges[2k], ranges[2k] + ranges[2k+1]) for k < count,
// all at once, so that reads of scattered records then wait for their misses together. A hint:
// nothing is read into JavaScript or written, and ranges outside src are skipped. Wrong types are
// a TypeError, a count past the array a RangeError.
napi_value PrefetchRanges(napi_env env, napi_callback_info info);

}  // namespace mqnative
