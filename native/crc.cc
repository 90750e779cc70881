#include "crc.h"

// zlib ships inside Node (with its carry-less-multiply CRC on x86-64 and ARMv8) and exports its
// symbols to addons, so the addon links against that copy rather than carrying its own.
#include <zlib.h>

#include <cstdint>

namespace mqnative {

namespace {

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

Napi::Value Crc32Ranges(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::TypedArray bytes, ranges, out;
  if (!TypedArrayOf(info, 0, napi_uint8_array, "bytes", &bytes) ||
      !TypedArrayOf(info, 1, napi_int32_array, "ranges", &ranges) ||
      !TypedArrayOf(info, 3, napi_int32_array, "out", &out)) {
    return env.Undefined();
  }
  if (info.Length() < 3 || !info[2].IsNumber()) {
    Napi::TypeError::New(env, "count must be a number").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const double count_value = info[2].As<Napi::Number>().DoubleValue();
  if (!(count_value >= 0) || count_value > static_cast<double>(out.ElementLength()) ||
      count_value * 2 > static_cast<double>(ranges.ElementLength()) ||
      count_value != static_cast<double>(static_cast<size_t>(count_value))) {
    Napi::RangeError::New(env, "count does not fit the arrays").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const size_t count = static_cast<size_t>(count_value);
  const auto* base = static_cast<const uint8_t*>(bytes.ArrayBuffer().Data()) + bytes.ByteOffset();
  const size_t size = bytes.ByteLength();
  const auto* pairs = reinterpret_cast<const int32_t*>(static_cast<const uint8_t*>(ranges.ArrayBuffer().Data()) +
                                                       ranges.ByteOffset());
  auto* result = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(out.ArrayBuffer().Data()) + out.ByteOffset());
  // Check every range before writing anything, so a bad call changes nothing.
  for (size_t k = 0; k < count; k++) {
    const int64_t start = pairs[2 * k];
    const int64_t length = pairs[2 * k + 1];
    if (start < 0 || length < 0 || static_cast<uint64_t>(start + length) > size) {
      Napi::RangeError::New(env, "range is outside bytes").ThrowAsJavaScriptException();
      return env.Undefined();
    }
  }
  // Chromium's zlib picks its SIMD code on a crc32(0, NULL, 0) call; make sure one happened.
  static const bool simd_checked = (crc32(0L, Z_NULL, 0), true);
  (void)simd_checked;
  for (size_t k = 0; k < count; k++) {
    const uInt length = static_cast<uInt>(pairs[2 * k + 1]);
    const uLong crc = length == 0 ? 0 : crc32(0L, base + pairs[2 * k], length);
    result[k] = static_cast<int32_t>(crc & 0x7fffffffUL);
  }
  return env.Undefined();
}

}  // namespace mqnative
