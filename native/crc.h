// CRC-32 of many byte ranges in one call (body CRCs of a batch of records).
#pragma once

#include <napi.h>

#include <cstddef>
#include <cstdint>

namespace mqnative {

// crc32Ranges(bytes: Uint8Array, ranges: Int32Array, count: number, out: Int32Array)
// For k < count: out[k] = crc32(bytes[ranges[2k], ranges[2k] + ranges[2k+1])) & 0x7fffffff,
// RocketMQ's BODYCRC. Throws on a range outside `bytes` or arrays too short for `count`. A plain
// Node-API function (no wrapper): a put calls it once per slice, often for one record.
napi_value Crc32Ranges(napi_env env, napi_callback_info info);

// crc32Each(bodies: unknown[], out: Int32Array)
// out[k] = BODYCRC of bodies[k] when it is a Uint8Array, else -1 (the caller computes it another
// way). One call for a batch of puts.
Napi::Value Crc32Each(const Napi::CallbackInfo& info);

// Copies [src, src + length) to dst (the ranges must not overlap) and returns zlib's CRC-32 of
// the bytes, computed in the same pass over the source where the CPU allows (carry-less multiply),
// else over the fresh copy.
uint32_t CopyCrc32(const uint8_t* src, uint8_t* dst, size_t length);

// Lets zlib select its SIMD CRC code once, before the first CRC of a call.
void EnsureCrcReady();

}  // namespace mqnative
