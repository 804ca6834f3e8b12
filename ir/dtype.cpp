// Element types and PyTorch-style type promotion.
#include "ir/dtype.h"

#include <string>

namespace kiln {

bool is_valid_dtype(DType t) {
  switch (t) {
    case DType::b8:
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
    throw Error(std::string(who) + ": expected a dtype (bool, i32, i64, f32 or f64), got DType(" +
                    std::to_string(static_cast<int>(t)) + ")",
                where);
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::b8:
      return 1;
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
  for (DType t : {DType::b8, DType::i32, DType::i64, DType::f32, DType::f64})
    if (name == dtype_name(t) || name == dtype_long_name(t)) return t;
  return std::nullopt;
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64;
}
bool is_integral(DType t) {
  return !is_floating(t);
}

// The enum is ordered bool < i32 < i64 < f32 < f64, which is exactly
// torch.promote_types on these five types (int64 with float32 gives float32).
DType promote_types(DType a, DType b) {
  return a < b ? b : a;
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
