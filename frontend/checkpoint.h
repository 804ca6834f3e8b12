// Saving training state to files and loading it back:
//   - a module's weights (parameters and buffers): libtorch's torch::save(module,
//     path) / torch::load(module, path);
//   - an optimizer's state (moments, momentum buffers, step count, learning
//     rate): torch::save(optimizer, path) / torch::load(optimizer, path);
//   - a training checkpoint: weights, optimizer state and the state of every
//     default random generator in one file, so a run resumed from it (in a new
//     process, with new objects) computes what the uninterrupted run would have.
// All in a checked binary format of Kiln's own.
//
// File format, version 1 (all integers little-endian; the frame and the
// records are the graph format's, frontend/serialize.h, runtime/binary_io.h):
//   magic, 13 to 16 bytes: "KILN-WEIGHTS\n", "KILN-OPTIMIZER\n" or "KILN-CHECKPOINT\n"
//   u32 version, u64 file size (all bytes, checksum included), u32 entry count
//   entries, each: u32 name length, name, u8 dtype (1 f32, 2 f64, 3 i32, 4 i64,
//     5 bool, 6 u8, 7 i8, 8 i16), u32 rank, i64 dims[rank], u64 data length, the
//     elements' raw little-endian bytes, row-major
//   u64 checksum of every byte before it (io::checksum64)
// The entries of a weights file: parameters then buffers in named_parameters()
// / named_buffers() order, under their dotted names ("0.weight", "fc1.bias").
// Of an optimizer file: its state() tensors as "state.0", "state.1", ..., then
// its learning rate as "lr" (f64, 0-d). Of a checkpoint: the weights as
// "module." + name, the optimizer's entries as "optimizer." + name (when one was
// saved), "rng.seed" (i64, 0-d: what default generators made later start from)
// and one "rng." + device ("rng.cpu", "rng.cuda:0") per default generator: its
// state, i64 [2] = {seed, offset} (Generator::get_state).
// Files are written atomically (temporary file, fsync, rename): a reader sees
// the old file or the whole new one, never a part.
#pragma once

#include <concepts>
#include <memory>
#include <string>

#include "frontend/nn.h"
#include "frontend/optim.h"

namespace kiln {

/// The format versions this build writes and reads.
inline constexpr uint32_t kWeightsFormatVersion = 1;
inline constexpr uint32_t kOptimizerFormatVersion = 1;
inline constexpr uint32_t kCheckpointFormatVersion = 1;

/// Saves every parameter and buffer of `module` and its children, under their
/// dotted names, to `path` (any device; the data is copied to the host).
void save(const nn::Module& module, const std::string& path);

/// Loads weights saved by save() into `module`, in place: each tensor keeps its
/// handle and device (a module on CUDA is loaded through the host), so an
/// optimizer built on module->parameters() goes on training the loaded values.
/// The file is checked first (magic, version, size, checksum, every record's
/// bounds), then its names, dtypes and shapes must match the module's exactly:
/// a missing or unexpected name, or another shape ("fc1.weight: the file has
/// shape [10,64], the module [128,64]"), is a kiln::Error naming the file, and
/// the module is left unchanged. Not inside a trace.
void load(nn::Module& module, const std::string& path);

/// The same for a module handle (nn::Linear, nn::Sequential, ...).
template <class Impl>
void save(const nn::ModuleHolder<Impl>& module, const std::string& path) {
  save(static_cast<const nn::Module&>(*module), path);
}
template <class Impl>
void load(const nn::ModuleHolder<Impl>& module, const std::string& path) {
  load(static_cast<nn::Module&>(*module), path);
}

/// The same for a module held by shared_ptr (std::make_shared<Net>()).
template <std::derived_from<nn::Module> M>
void save(const std::shared_ptr<M>& module, const std::string& path) {
  KILN_CHECK(module, "save(", path, "): the module pointer is null");
  save(static_cast<const nn::Module&>(*module), path);
}
template <std::derived_from<nn::Module> M>
void load(const std::shared_ptr<M>& module, const std::string& path) {
  KILN_CHECK(module, "load(", path, "): the module pointer is null");
  load(static_cast<nn::Module&>(*module), path);
}

/// Saves the optimizer's state: its state() tensors (any device; copied to the
/// host) and its learning rate.
void save(const optim::Optimizer& optimizer, const std::string& path);

/// Loads a state saved by save(optimizer, path) into `optimizer`, in place: it
/// must be of the same kind, with the same options that shape its state (SGD's
/// momentum), over parameters of the same dtypes and shapes. Checked as
/// load(module) checks ("state.2: the file has shape [10], the optimizer [20]"),
/// every check before any write. Sets the learning rate. Not inside a trace.
void load(optim::Optimizer& optimizer, const std::string& path);

namespace detail {
void save_checkpoint(const std::string& path, const nn::Module& module,
                     const optim::Optimizer* optimizer);
void load_checkpoint(const std::string& path, nn::Module& module, optim::Optimizer* optimizer);
inline const nn::Module& as_module(const nn::Module& m) {
  return m;
}
inline nn::Module& as_module(nn::Module& m) {
  return m;
}
template <class Impl>
nn::Module& as_module(const nn::ModuleHolder<Impl>& m) {
  return static_cast<nn::Module&>(*m);
}
template <std::derived_from<nn::Module> M>
nn::Module& as_module(const std::shared_ptr<M>& m) {
  KILN_CHECK(m, "checkpoint: the module pointer is null");
  return static_cast<nn::Module&>(*m);
}
}  // namespace detail

/// Saves a training checkpoint to `path`: the module's weights, the optimizer's
/// state and the state of every default random generator (see the file comment).
/// `module` is a module, a module handle (nn::Sequential) or a shared_ptr to one.
template <class M>
void save_checkpoint(const std::string& path, const M& module, const optim::Optimizer& optimizer) {
  detail::save_checkpoint(path, detail::as_module(module), &optimizer);
}
/// The same without an optimizer (a loop that updates the weights itself).
template <class M>
void save_checkpoint(const std::string& path, const M& module) {
  detail::save_checkpoint(path, detail::as_module(module), nullptr);
}

/// Loads a checkpoint saved by save_checkpoint into the module and optimizer, in
/// place, and sets every default generator's state: the draws from then on (rand,
/// dropout, randperm, ...) are those the saving run made after save_checkpoint,
/// so a resumed run computes what the uninterrupted run did. The module and the
/// optimizer are checked as load() checks them; a checkpoint saved with an
/// optimizer loads only with one, and one saved without only without. Every check
/// before any write. Not inside a trace.
template <class M>
void load_checkpoint(const std::string& path, M& module, optim::Optimizer& optimizer) {
  detail::load_checkpoint(path, detail::as_module(module), &optimizer);
}
template <class M>
void load_checkpoint(const std::string& path, M& module) {
  detail::load_checkpoint(path, detail::as_module(module), nullptr);
}

}  // namespace kiln
