// Internal to the frontend: raw random draws for ops built on random keys
// outside random.cpp (randperm sorts them), and the default generators' states
// as a whole, for checkpoints (frontend/checkpoint.cpp).
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::detail {

/// 64-bit random integers of `shape` on device `d` (every int64 value equally
/// likely: philox's i64 draw), from `gen` or the device's default generator,
/// which advances by one counter per element. Errors name `op`.
Tensor random_bits(const Shape& shape, const std::optional<Generator>& gen, Device d,
                   const char* op, Loc loc);

/// Every default generator's state, and the seed of those made later.
struct DefaultRngStates {
  uint64_t seed = kDefaultSeed;
  std::vector<std::pair<Device, Tensor>> states;  // get_state() of each default generator
};
/// The default generators as they are now (not inside a trace).
DefaultRngStates default_rng_states();
/// Makes the default generators what `s` says: those it lists get their state
/// (those not made yet get it when they are), the others restart from s.seed,
/// as after manual_seed(s.seed). Not inside a trace; every state must be an
/// int64 tensor of shape [2].
void set_default_rng_states(const DefaultRngStates& s, Loc loc);

}  // namespace kiln::detail
