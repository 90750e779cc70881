#include "crc.h"
#include "typed-args.h"

// zlib ships inside Node (with its carry-less-multiply CRC on x86-64 and ARMv8) and exports its
// symbols to addons, so the addon links against that copy rather than carrying its own.
#include <zlib.h>

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MQ_CRC_PCLMUL 1
#endif

namespace mqnative {

namespace {

#if defined(MQ_CRC_PCLMUL)
// CRC-32 (the reflected 0xEDB88320 polynomial, as zlib) by carry-less multiplication: fold four
// 128-bit lanes 64 bytes at a time, fold them into one, then reduce 128 -> 64 -> 32 bits and
// finish with a Barrett reduction (Intel's "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ", 2009). Works on the raw register (not inverted); `length` is >= 64 and a multiple of
// 16. About ten times zlib's table code on 256-byte bodies.
//
// The constants are x^k mod P for the fold distances, bit-reflected and shifted by one:
//   fold by 512 bits: x^(512+32), x^(512-32); by 128 bits: x^(128+32), x^(128-32); 64 -> 32: x^64;
//   Barrett: P itself (33 bits) and mu = floor(x^64 / P).
#define MQ_PCLMUL_TARGET __attribute__((target("pclmul,sse4.1")))

MQ_PCLMUL_TARGET inline __m128i Load(const uint8_t* at) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at)); }

// Loads 16 bytes at p + at, and with kCopy stores them at out + at.
template <bool kCopy>
MQ_PCLMUL_TARGET inline __m128i Take(const uint8_t* p, uint8_t* out, size_t at) {
  const __m128i v = Load(p + at);
  if (kCopy) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + at), v);
  return v;
}

// a.low * k.low ^ a.high * k.high: folds `a` forward by the distance `k` encodes.
MQ_PCLMUL_TARGET inline __m128i Fold(__m128i a, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}

// With kCopy, each 16 bytes loaded is also stored to `out`: a copy and its CRC in one pass over
// the source (what a read serves is what was checked).
template <bool kCopy>
MQ_PCLMUL_TARGET uint32_t CrcFold(uint32_t crc, const uint8_t* p, size_t length, uint8_t* out) {
  const __m128i fold512 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
  const __m128i fold128 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
  const __m128i fold64 = _mm_set_epi64x(0, 0x163cd6124);
  const __m128i barrett = _mm_set_epi64x(0x1f7011641, 0x1db710641);
  const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
  __m128i x1 = _mm_xor_si128(Take<kCopy>(p, out, 0), _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i x2 = Take<kCopy>(p, out, 16);
  __m128i x3 = Take<kCopy>(p, out, 32);
  __m128i x4 = Take<kCopy>(p, out, 48);
  p += 64;
  if (kCopy) out += 64;
  length -= 64;
  while (length >= 64) {
    x1 = _mm_xor_si128(Fold(x1, fold512), Take<kCopy>(p, out, 0));
    x2 = _mm_xor_si128(Fold(x2, fold512), Take<kCopy>(p, out, 16));
    x3 = _mm_xor_si128(Fold(x3, fold512), Take<kCopy>(p, out, 32));
    x4 = _mm_xor_si128(Fold(x4, fold512), Take<kCopy>(p, out, 48));
    p += 64;
    if (kCopy) out += 64;
    length -= 64;
  }
  x1 = _mm_xor_si128(Fold(x1, fold128), x2);
  x1 = _mm_xor_si128(Fold(x1, fold128), x3);
  x1 = _mm_xor_si128(Fold(x1, fold128), x4);
  while (length >= 16) {
    x1 = _mm_xor_si128(Fold(x1, fold128), Take<kCopy>(p, out, 0));
    p += 16;
    if (kCopy) out += 16;
    length -= 16;
  }
  // 128 -> 64 bits.
  x2 = _mm_clmulepi64_si128(x1, fold128, 0x10);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
  // 64 -> 32 bits.
  x2 = _mm_srli_si128(x1, 4);
  x1 = _mm_and_si128(x1, low32);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, fold64, 0x00), x2);
  // Barrett reduction to the 32-bit remainder.
  x2 = _mm_and_si128(x1, low32);
  x2 = _mm_clmulepi64_si128(x2, barrett, 0x10);
  x2 = _mm_and_si128(x2, low32);
  x2 = _mm_clmulepi64_si128(x2, barrett, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}

const bool kHasPclmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif

// zlib's crc32() of [p, p + length), through the folding code for the bulk where the CPU has it.
uint32_t Crc32(const uint8_t* p, size_t length) {
#if defined(MQ_CRC_PCLMUL)
  if (kHasPclmul && length >= 64) {
    const size_t bulk = length & ~static_cast<size_t>(15);
    const uint32_t reg = CrcFold<false>(0xffffffffu, p, bulk, nullptr);
    if (bulk == length) return ~reg;
    return static_cast<uint32_t>(crc32(~reg, p + bulk, static_cast<uInt>(length - bulk)));
  }
#endif
  return length == 0 ? 0 : static_cast<uint32_t>(crc32(0L, p, static_cast<uInt>(length)));
}

}  // namespace

uint32_t CopyCrc32(const uint8_t* src, uint8_t* dst, size_t length) {
#if defined(MQ_CRC_PCLMUL)
  if (kHasPclmul && length >= 64) {
    const size_t bulk = length & ~static_cast<size_t>(15);
    const uint32_t reg = CrcFold<true>(0xffffffffu, src, bulk, dst);
    if (bulk == length) return ~reg;
    memcpy(dst + bulk, src + bulk, length - bulk);
    return static_cast<uint32_t>(crc32(~reg, dst + bulk, static_cast<uInt>(length - bulk)));
  }
#endif
  // The CRC runs over the copy, still in the cache: the bytes checked are the bytes served.
  memcpy(dst, src, length);
  return Crc32(dst, length);
}

void EnsureCrcReady() {
  // Chromium's zlib picks its SIMD code on a crc32(0, NULL, 0) call; make sure one happened.
  static const bool simd_checked = (crc32(0L, Z_NULL, 0), true);
  (void)simd_checked;
}

namespace {

constexpr size_t kCrc32RangesArgs = 4;

bool TypedArrayOf(const Napi::CallbackInfo& info, size_t index, napi_typedarray_type type, const char* name,
                  Napi::TypedArray* out) {
  if (info.Length() <= index || !info[index].IsTypedArray() ||
      info[index].As<Napi::TypedArray>().TypedArrayType() != type) {
    Napi::TypeError::New(info.Env(), std::string(name) + " has the wrong type").ThrowAsJavaScriptException();
    return false;
  }
  *out = info[index].As<Napi::TypedArray>();
  return true;
}

}  // namespace

napi_value Crc32Ranges(napi_env env, napi_callback_info info) {
  size_t argc = kCrc32RangesArgs;
  napi_value args[kCrc32RangesArgs];
  if (napi_get_cb_info(env, info, &argc, args, nullptr, nullptr) != napi_ok) return nullptr;
  // Missing arguments read as undefined, which no check below accepts.
  napi_value undefined;
  if (napi_get_undefined(env, &undefined) != napi_ok) return nullptr;
  for (size_t k = argc; k < kCrc32RangesArgs; k++) args[k] = undefined;
  View bytes, ranges, out;
  if (!TypedArrayArg(env, args[0], napi_uint8_array, "bytes has the wrong type", &bytes) ||
      !TypedArrayArg(env, args[1], napi_int32_array, "ranges has the wrong type", &ranges) ||
      !TypedArrayArg(env, args[3], napi_int32_array, "out has the wrong type", &out)) {
    return nullptr;
  }
  double count_value = 0;
  if (!NumberArg(env, args[2], "count must be a number", &count_value)) return nullptr;
  if (!(count_value >= 0) || count_value > static_cast<double>(out.length) ||
      count_value * 2 > static_cast<double>(ranges.length) ||
      count_value != static_cast<double>(static_cast<size_t>(count_value))) {
    napi_throw_range_error(env, nullptr, "count does not fit the arrays");
    return nullptr;
  }
  const size_t count = static_cast<size_t>(count_value);
  const auto* pairs = reinterpret_cast<const int32_t*>(ranges.data);
  auto* result = reinterpret_cast<int32_t*>(out.data);
  // Check every range before writing anything, so a bad call changes nothing.
  for (size_t k = 0; k < count; k++) {
    const int64_t start = pairs[2 * k];
    const int64_t length = pairs[2 * k + 1];
    if (start < 0 || length < 0 || static_cast<uint64_t>(start + length) > bytes.length) {
      napi_throw_range_error(env, nullptr, "range is outside bytes");
      return nullptr;
    }
  }
  EnsureCrcReady();
  for (size_t k = 0; k < count; k++) {
    const uint32_t crc = Crc32(bytes.data + pairs[2 * k], static_cast<size_t>(pairs[2 * k + 1]));
    result[k] = static_cast<int32_t>(crc & 0x7fffffffu);
  }
  return nullptr;
}

Napi::Value Crc32Each(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::TypedArray out;
  if (info.Length() < 2 || !info[0].IsArray() || !TypedArrayOf(info, 1, napi_int32_array, "out", &out)) {
    if (!env.IsExceptionPending()) Napi::TypeError::New(env, "bodies must be an array").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Array bodies = info[0].As<Napi::Array>();
  const uint32_t count = bodies.Length();
  if (count > out.ElementLength()) {
    Napi::RangeError::New(env, "out is shorter than bodies").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto* result = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(out.ArrayBuffer().Data()) + out.ByteOffset());
  // Plain Node-API calls: two per body (the wrapper's checks would cost four more).
  napi_value list = bodies;
  for (uint32_t k = 0; k < count; k++) {
    napi_value body;
    napi_typedarray_type type;
    size_t length = 0;
    void* data = nullptr;
    bool is_typed = false;
    if (napi_get_element(env, list, k, &body) != napi_ok || napi_is_typedarray(env, body, &is_typed) != napi_ok || !is_typed ||
        napi_get_typedarray_info(env, body, &type, &length, &data, nullptr, nullptr) != napi_ok || type != napi_uint8_array) {
      result[k] = -1;
      continue;
    }
    result[k] = static_cast<int32_t>(Crc32(static_cast<const uint8_t*>(data), length) & 0x7fffffffu);
  }
  return env.Undefined();
}

}  // namespace mqnative
