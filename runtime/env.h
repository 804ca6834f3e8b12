// Kiln's environment switches (KILN_*), parsed strictly in one place: a value
// the switch does not take is a kiln::Error that names the switch, what it
// takes and what came ("KILN_NUM_THREADS=100000: expected a whole number from
// 1 to 1024"), never a silent default or a failure somewhere else. An unset or
// empty switch takes its default. Internal: not part of <kiln/kiln.h>.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

namespace kiln::env {

/// The switch's value; nullopt when it is unset or empty.
std::optional<std::string> get(const char* name);

/// A yes/no switch: 1, true, on, yes or 0, false, off, no (in any case).
bool flag(const char* name, bool fallback);

/// A whole number from lo to hi (decimal, no sign but '-' for negatives, no
/// trailing text).
int64_t integer(const char* name, int64_t lo, int64_t hi, int64_t fallback);

/// One of `choices`, by its index in them.
size_t choice(const char* name, std::initializer_list<const char*> choices, size_t fallback);

}  // namespace kiln::env
