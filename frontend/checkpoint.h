// Saving a module's weights (parameters and buffers) to a file and loading them
// back into a module of the same structure: libtorch's torch::save(module,
// path) / torch::load(module, path), in a checked binary format of Kiln's own.
//
// File format, version 1 (all integers little-endian; the frame and the
// records are the graph format's, frontend/serialize.h, runtime/binary_io.h):
//   "KILN-WEIGHTS\n"                    magic, 13 bytes
//   u32 version, u64 file size (all bytes, checksum included), u32 entry count
//   entries, parameters then buffers in named_parameters()/named_buffers()
//   order, each: u32 name length, dotted name ("0.weight", "fc1.bias"),
//     u8 dtype (1 f32, 2 f64, 3 i32, 4 i64, 5 bool, 6 u8, 7 i8, 8 i16), u32 rank, i64 dims[rank],
//     u64 data length, the elements' raw little-endian bytes, row-major
//   u64 checksum of every byte before it (io::checksum64)
// Files are written atomically (temporary file, fsync, rename): a reader sees
// the old file or the whole new one, never a part.
#pragma once

#include <concepts>
#include <memory>
#include <string>

#include "frontend/nn.h"

namespace kiln {

/// The weights format version this build writes and reads.
inline constexpr uint32_t kWeightsFormatVersion = 1;

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

}  // namespace kiln
