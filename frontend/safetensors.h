// safetensors files (the format of Hugging Face's safetensors, which PyTorch
// programs write with safetensors.torch.save_file): weights trained in Python,
// loaded into a Kiln module by named_parameters() / named_buffers() names
// ("train in Python, deploy in C++").
//
// The format: u64 little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [4, 1, 3, 3], "data_offsets": [begin, end]},
//    ..., "__metadata__": {"key": "value", ...}}
// then the data, each tensor's raw little-endian elements row-major at
// [begin, end) of it. The JSON is parsed with nlohmann-json (Debian's
// nlohmann-json3-dev). dtypes read: F64, F32, F16 and BF16 (converted to
// float32), I64, I32, I16, I8, U8 and BOOL; others are errors naming the tensor.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "frontend/nn.h"
#include "frontend/tensor.h"

namespace kiln {

/// The tensors of a safetensors file by name (new CPU tensors), checking
/// everything: the header's length and JSON, every entry's dtype, shape and
/// offsets against the data (in bounds, of the size dtype and shape give, not
/// overlapping). A damaged or foreign file is a kiln::Error naming the file
/// and what is wrong.
std::map<std::string, Tensor> read_safetensors(const std::string& path);
/// The same from a file's bytes; `name` is used in errors.
std::map<std::string, Tensor> parse_safetensors(const std::string& bytes, const std::string& name);
/// The "__metadata__" strings of a safetensors file (empty when it has none).
std::map<std::string, std::string> safetensors_metadata(const std::string& path);

/// Writes tensors (any device, any layout) as a safetensors file, atomically,
/// with optional metadata. Names must be unique and not "__metadata__".
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

struct SafetensorsLoadOptions {
  /// Every parameter and buffer must be in the file, and every tensor of the
  /// file in the module, except BatchNorm's batch counters
  /// ("*.num_batches_tracked"): loaded when in both, never required.
  bool strict = true;
};

/// Loads the file's tensors into `module`'s parameters and buffers of the same
/// dotted names, in place (each tensor keeps its handle, device and dtype;
/// floating values are converted to the module's dtype). Shapes must match.
/// Every check before any write: on an error the module is unchanged. Returns
/// the names loaded.
std::vector<std::string> load_safetensors(nn::Module& module, const std::string& path,
                                          const SafetensorsLoadOptions& options = {});
template <class Impl>
std::vector<std::string> load_safetensors(const nn::ModuleHolder<Impl>& module,
                                          const std::string& path,
                                          const SafetensorsLoadOptions& options = {}) {
  return load_safetensors(static_cast<nn::Module&>(*module), path, options);
}

/// Writes a module's parameters and buffers under their dotted names.
void save_safetensors(const nn::Module& module, const std::string& path);

}  // namespace kiln
