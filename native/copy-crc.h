// Copies many byte ranges out of one buffer into two, and checksums the ones a read serves, in one
// call (a read's records and their bodies).
#pragma once

#include <napi.h>

namespace mqnative {

// splitCopyCrc(src: Uint8Array, table: Float64Array, count: number, outer: Uint8Array, outerAt: number,
//              inner: Uint8Array, innerAt: number, crcOut: Int32Array | null)
// Four table entries per k < count: [start, length, innerStart, innerLength], the inner range lying
// within [start, start + length). The bytes around the inner range (those before it, then those
// after it) go end to end into `outer` from outerAt, range after range; the inner bytes go end to
// end into `inner` from innerAt, with crcOut[k] (when given) set to their BODYCRC from the same
// pass: a read's records without their bodies, and the bodies, in one call with one row each.
// Every argument is checked before anything is written: a TypeError for a wrong type, a RangeError
// for a count past the arrays, a range outside src or an inner range outside its range, a
// position that is not a non-negative integer, bytes that do not fit a destination, or a
// destination overlapping src.
napi_value SplitCopyCrc(napi_env env, napi_callback_info info);

// prefetchRanges(src: Uint8Array, ranges: Float64Array, count: number)
// Asks the CPU to load the cache lines of src[ranges[2k], ranges[2k] + ranges[2k+1]) for k < count,
// all at once, so that reads of scattered records then wait for their misses together. A hint:
// nothing is read into JavaScript or written, and ranges outside src are skipped. Wrong types are
// a TypeError, a count past the array a RangeError.
napi_value PrefetchRanges(napi_env env, napi_callback_info info);

}  // namespace mqnative
