// Element types and PyTorch-style type promotion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ir/error.h"

namespace kiln {

/// Element types. promote_types says which of two a result takes (bool <
/// integers < floats, as PyTorch); the small integer types came later and are
/// numbered after the others, so older numbers keep their meaning.
enum class DType : uint8_t { b8, i32, i64, f32, f64, u8, i8, i16 };

inline constexpr DType kBool = DType::b8;
inline constexpr DType kUInt8 = DType::u8;
inline constexpr DType kByte = DType::u8;
inline constexpr DType kInt8 = DType::i8;
inline constexpr DType kChar = DType::i8;
inline constexpr DType kInt16 = DType::i16;
inline constexpr DType kShort = DType::i16;
inline constexpr DType kInt32 = DType::i32;
inline constexpr DType kInt = DType::i32;
inline constexpr DType kInt64 = DType::i64;
inline constexpr DType kLong = DType::i64;
inline constexpr DType kFloat32 = DType::f32;
inline constexpr DType kFloat = DType::f32;
inline constexpr DType kFloat64 = DType::f64;
inline constexpr DType kDouble = DType::f64;

/// True for the eight dtypes above; false for any other number cast to DType.
bool is_valid_dtype(DType t);
/// Throws kiln::Error ("<who>: expected a dtype (bool, u8, i8, i16, i32, i64,
/// f32 or f64), got DType(17)", at `where`) unless t is one of the eight.
void check_dtype(DType t, const char* who, SourceLoc where = {});

/// Bytes per element.
size_t dtype_size(DType t);
/// Short name used by the IR text: "f32", "f64", "u8", "i8", "i16", "i32", "i64", "bool".
const char* dtype_name(DType t);
/// PyTorch's name: "torch.float32"-style without the prefix ("float32", "uint8", "int64", "bool").
const char* dtype_long_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
bool is_floating(DType t);
bool is_integral(DType t);  // integers and bool
/// True for u8 (and bool): the types whose values are never negative.
bool is_unsigned(DType t);
/// Every dtype, for tables and tests.
inline constexpr DType kAllDTypes[] = {DType::b8,  DType::u8,  DType::i8,  DType::i16,
                                       DType::i32, DType::i64, DType::f32, DType::f64};

/// Promotion of two tensor dtypes, as torch.promote_types (int64 * f32 -> f32,
/// uint8 * int8 -> int16).
DType promote_types(DType a, DType b);

/// The category of a plain C++ number used as an operand.
enum class ScalarKind : uint8_t { boolean, integer, floating };

/// Promotion of a tensor dtype with a plain number, as PyTorch does for
/// Python scalars: the number only matters if it is of a higher category
/// (i32 tensor * 2.5 -> f32 default float; f64 tensor * 2.5 -> f64; i32 * 2 -> i32).
DType promote_with_scalar(DType tensor, ScalarKind scalar);

/// Maps a C++ type to its DType (float -> f32, double -> f64, uint8_t, int8_t,
/// int16_t, int32_t, int64_t, bool).
template <class T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<bool>() { return DType::b8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<int8_t>() { return DType::i8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::i16; }

/// Calls f(T{}) with the C++ type of t (float, double, uint8_t, int8_t,
/// int16_t, int32_t, int64_t, bool).
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::b8: return f(bool{});
    case DType::u8: return f(uint8_t{});
    case DType::i8: return f(int8_t{});
    case DType::i16: return f(int16_t{});
  }
  return f(float{});
}

}  // namespace kiln
