// Random number generators, after libtorch's at::Generator: a counter-based
// Philox-4x32-10 stream (ir/ops.def, philox) keyed by the seed, with an offset
// that counts the counters used so far. A draw of n values of one counter each
// reads counters offset .. offset+n-1 and advances the offset by n (randn uses
// two counters per value). The state is those two numbers, so saving it and
// setting it back later resumes the stream exactly.
//
// Each device has a default generator (what rand, randn, randint, randperm,
// bernoulli and dropout draw from when given none); Generator objects are
// independent streams of their own. A traced function reads a generator's
// state as captured tensors and advances it at every call, so compiled and
// eager code draw the same numbers.
#pragma once

#include <cstdint>
#include <memory>

#include "frontend/loc.h"
#include "ir/device.h"

namespace kiln {

class Tensor;

/// The seed of a generator nobody seeded (PyTorch's default seed).
inline constexpr uint64_t kDefaultSeed = 67280421310721ull;

/// A random number generator on one device. A handle, like at::Generator:
/// copies share one state; clone() makes an independent copy.
///
/// Setters write the state in place with tensor ops, so inside a traced
/// function they are part of the compiled plan (done at every call, as
/// eagerly), and get_state is a tensor op too; current_seed and get_offset read
/// numbers out, which is an error inside a trace. A generator made inside a
/// traced function is that call's own, as it is eagerly.
class Generator {
 public:
  /// A new generator on `device`, seeded with kDefaultSeed, offset 0.
  explicit Generator(Device device = Device(), KILN_LOC);
  /// Seeds it (the Philox key) and restarts its stream (offset 0); returns
  /// *this, as torch.Generator.manual_seed does.
  Generator& manual_seed(uint64_t seed, KILN_LOC);
  /// libtorch's spelling of manual_seed.
  void set_current_seed(uint64_t seed, KILN_LOC) { manual_seed(seed, loc); }
  /// The seed it was last seeded with (libtorch: current_seed; Python: initial_seed).
  uint64_t current_seed(KILN_LOC) const;
  uint64_t initial_seed(KILN_LOC) const { return current_seed(loc); }
  /// Seeds it from std::random_device and returns that seed (torch.Generator.seed).
  uint64_t seed(KILN_LOC);
  /// Counters used so far: the next draw starts at this one.
  void set_offset(uint64_t offset, KILN_LOC);
  uint64_t get_offset(KILN_LOC) const;
  /// The state as a new CPU int64 tensor of shape [2]: {seed, offset} (the
  /// offset's bits as int64).
  Tensor get_state(KILN_LOC) const;
  /// Sets the state from a tensor get_state() returned (any device): an int64
  /// tensor of shape [2], else a kiln::Error.
  void set_state(const Tensor& state, KILN_LOC);
  Device device() const;
  /// An independent generator with a copy of this state.
  Generator clone(KILN_LOC) const;
  /// Whether both handles share one state.
  friend bool operator==(const Generator& a, const Generator& b) { return a.impl_ == b.impl_; }

  /// Internal: the shared state.
  struct Impl;
  explicit Generator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

/// The default generator of `device`: draws given no generator use it
/// (libtorch: at::globalContext().defaultGenerator(device); Python:
/// torch.default_generator). Made on first use, from manual_seed's last seed.
Generator default_generator(Device device = Device());

/// The state of `device`'s default generator, as Generator::get_state
/// (torch.get_rng_state(), torch.cuda.get_rng_state(device)).
Tensor get_rng_state(Device device = Device(), KILN_LOC);
/// Sets the state of `device`'s default generator (torch.set_rng_state).
void set_rng_state(const Tensor& state, Device device = Device(), KILN_LOC);

/// Seeds the default generator of every device (key = seed, offset 0), and of
/// devices used later: the same seed gives the same draws, eagerly and in
/// compiled functions alike. Outside traced functions (an error inside: seed a
/// Generator there, whose seeding the plan repeats at every call).
void manual_seed(uint64_t seed, KILN_LOC);

}  // namespace kiln
