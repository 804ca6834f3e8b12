// Saving a traced graph with its parameter data to one file, and loading and
// running it with none of the code that traced it ("deploy without the code").
//
// File format, version 1 (all integers little-endian):
//   "KILN-GRAPH\n"                      magic, 11 bytes
//   u32 version, u64 file size (all bytes, checksum included), u32 section count
//   sections, each: 4-byte tag, u64 payload length, payload
//     "META"  text lines "key=value" (producer, name)
//     "GRPH"  the graph's canonical IR text with source locations (ir/printer.h)
//     "PARM"  one per parameter, in index order: u64 index, u32 name length, name,
//             u8 dtype (1 f32, 2 f64, 3 i32, 4 i64, 5 bool, 6 u8, 7 i8, 8 i16), u32 rank, i64
//             dims[rank], u64 data length, the elements' raw little-endian bytes, row-major
//   u64 checksum of every byte before it (io::checksum64, runtime/binary_io.h)
// Files are written atomically (temporary file, fsync, rename). Loading checks
// everything: a damaged, truncated or foreign file is a kiln::Error naming the
// file, what is wrong and where, never a crash.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "frontend/tensor.h"
#include "ir/graph.h"

namespace kiln {

/// The format version this build writes and reads.
inline constexpr uint32_t kGraphFormatVersion = 1;

struct SaveOptions {
  std::string name;  // a name for the function (shown by `kiln explain` and in dumps)
};

/// Saves `g` (a graph as traced, or after passes) and the data of its
/// parameters: params[i] is the tensor of the param node with index i, of the
/// node's dtype and shape. Graphs with custom (user-code) nodes cannot be saved.
void save_graph(const std::string& path, const Graph& g, const std::vector<Tensor>& params,
                const SaveOptions& opts = {});

/// A graph and its parameters, as loaded from a file.
struct SavedGraph {
  Graph graph;
  std::vector<Tensor> params;  // CPU tensors, by param index
  std::string name;            // from SaveOptions, or "" if none was saved
};

/// Loads a file written by save_graph. Checks the magic, the version, the size,
/// the checksum, every section's bounds, that each parameter matches its param
/// node's type, then verifies the graph. Throws kiln::Error naming the file.
SavedGraph load_graph(const std::string& path);

/// A saved graph ready to call: compiles (compile_graph, codegen/compile.h) on
/// the first call and runs the plan; parameter updates recorded in the graph
/// (an optimizer step) are applied to its own parameter tensors. Copies share
/// the same state. Calls on one LoadedFunction must not run concurrently.
class LoadedFunction {
 public:
  LoadedFunction() = default;
  /// `origin` names the function in errors (the file it came from).
  LoadedFunction(SavedGraph saved, std::string origin);

  /// Runs the graph. The arguments must have exactly the saved argument types
  /// (arg_types()); any mismatch is a kiln::Error saying which and how.
  std::vector<Tensor> operator()(const std::vector<Tensor>& args) const;

  const Graph& graph() const;
  /// The parameters, updated in place by graphs that update them.
  const std::vector<Tensor>& params() const;
  std::vector<TensorType> arg_types() const;
  std::vector<TensorType> output_types() const;
  /// The saved function name, or the file's name when none was saved.
  const std::string& name() const;
  /// Fusion on/off for the next compile (default: follows set_fusion_enabled).
  void set_fusion(bool on) const;

 private:
  struct State;
  std::shared_ptr<State> s_;
};

/// load_graph(path), ready to call.
LoadedFunction load(const std::string& path);

}  // namespace kiln
