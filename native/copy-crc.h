// Copies many byte ranges into one buffer and checksums each, in one call (a read's records).
#pragma once

#include <napi.h>

namespace mqnative {

// copyCrcRanges(src: Uint8Array, ranges: Float64Array, count: number, dst: Uint8Array,
//               dstOffsets: Float64Array, crcOut: Int32Array | null)
// For k < count: copies src[ranges[2k], ranges[2k] + ranges[2k+1]) to dst at dstOffsets[k] and,
// when crcOut is given, sets crcOut[k] = crc32 of those bytes & 0x7fffffff (RocketMQ's BODYCRC),
// from the same pass over memory. Every argument is checked before anything is written: a
// TypeError for a wrong type, a RangeError for a count past the arrays, a range outside src or
// dst, a position that is not a non-negative integer, or a destination that overlaps its source.
napi_value CopyCrcRanges(napi_env env, napi_callback_info info);

// prefetchRanges(src: Uint8Array, ranges: Float64Array, count: number)
// Asks the CPU to load the cache lines of src[ranges[2k], ranges[2k] + ranges[2k+1]) for k < count,
// all at once, so that reads of scattered records then wait for their misses together. A hint:
// nothing is read into JavaScript or written, and ranges outside src are skipped. Wrong types are
// a TypeError, a count past the array a RangeError.
napi_value PrefetchRanges(napi_env env, napi_callback_info info);

}  // namespace mqnative
