// A value built again on another device: what a traced function's to(device)
// of a value computed from creation ops alone becomes (frontend/trace_state.cpp),
// since a compiled graph runs on one device.
#pragma once

#include "ir/builder.h"

namespace kiln {

/// Value v of b's graph built again through b (at b.loc) on `device`: its
/// creation ops (a literal, a constant, an arange) with that device, and the
/// unary, binary, ternary, reduce, scan and movement ops that compute v from
/// them. An invalid Value when v depends on an input (arg, param) or on an op
/// whose result type is not inferred from its operands (a custom call, a
/// collective, a check).
Value rebuild_on_device(Builder& b, Value v, Device device);

}  // namespace kiln
