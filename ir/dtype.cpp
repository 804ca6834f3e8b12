// Element types and PyTorch-style type promotion.
#include "ir/dtype.h"

#include <string>

namespace kiln {

bool is_valid_dtype(DType t) {
  switch (t) {
    case DType::b8:
    case DType::u8:
    case DType::i8:
    case DType::i16:
    case DType::i32:
    case DType::i64:
    case DType::f32:
    case DType::f64:
      return true;
  }
  return false;
}

void check_dtype(DType t, const char* who, SourceLoc where) {
  if (!is_valid_dtype(t))
    throw Error(std::string(who) + ": expected a dtype (bool, u8, i8, i16, i32, i64, f32 or f64), got DType(" +
                    std::to_string(static_cast<int>(t)) + ")",
                where);
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::b8:
    case DType::u8:
    case DType::i8:
      return 1;
    case DType::i16:
      return 2;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::b8:
      return "bool";
    case DType::u8:
      return "u8";
    case DType::i8:
      return "i8";
    case DType::i16:
      return "i16";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
  }
  return "?";
}

const char* dtype_long_name(DType t) {
  switch (t) {
    case DType::b8:
      return "bool";
    case DType::u8:
      return "uint8";
    case DType::i8:
      return "int8";
    case DType::i16:
      return "int16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes)
    if (name == dtype_name(t) || name == dtype_long_name(t)) return t;
  return std::nullopt;
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64;
}
bool is_integral(DType t) {
  return !is_floating(t);
}
bool is_unsigned(DType t) {
  return t == DType::b8 || t == DType::u8;
}

namespace {
// Bit width of an integer type's values (bool counts as 1).
int bits(DType t) {
  switch (t) {
    case DType::b8:
      return 1;
    case DType::u8:
    case DType::i8:
      return 8;
    case DType::i16:
      return 16;
    case DType::i32:
      return 32;
    default:
      return 64;
  }
}
}  // namespace

// torch.promote_types: bool < integers < floats; among floats the wider; among
// integers the wider, and a signed type that holds every uint8 value when one
// side is uint8 and the other signed (uint8 with int8 gives int16).
DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_floating(a) || is_floating(b)) {
    if (is_floating(a) && is_floating(b))
      return a == DType::f64 || b == DType::f64 ? DType::f64 : DType::f32;
    return is_floating(a) ? a : b;
  }
  if (a == DType::b8) return b;
  if (b == DType::b8) return a;
  if (a == DType::u8 || b == DType::u8) {
    const DType other = a == DType::u8 ? b : a;  // signed
    return other == DType::i8 ? DType::i16 : other;
  }
  return bits(a) >= bits(b) ? a : b;
}

DType promote_with_scalar(DType tensor, ScalarKind scalar) {
  switch (scalar) {
    case ScalarKind::boolean:
      return tensor;
    case ScalarKind::integer:
      return tensor == DType::b8 ? DType::i64 : tensor;
    case ScalarKind::floating:
      return is_floating(tensor) ? tensor : DType::f32;
  }
  return tensor;
}

}  // namespace kiln
