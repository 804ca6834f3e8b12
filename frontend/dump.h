// Kernel dumps: everything a compiled function became, as files.
//   <dir>/<function>/<signature>/
//     00_traced.kir, 01_<pass>.kir ...   the graph after each pass ("unchanged" if so)
//     fusion.txt, memory.txt             fusion groups and the buffer plan
//     kernels/<kernel>.kir .ll .opt.ll .s   kernel IR, LLVM IR before/after O3, assembly
//     kernels/<kernel>.cu .ptx           CUDA plans: generated CUDA C, NVRTC's PTX
//     summary.txt                        kernels in order: nodes, source lines, bytes, flops, time
// Every file is written atomically (temporary file, then rename).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct CompileReport;

/// Writes the dump of one compiled signature; returns its directory.
std::string write_dump(const std::string& dir, const std::string& function, const Graph& traced,
                       const CompileReport& report, const std::vector<TensorType>& arg_types);

/// Writes `text` to `path` atomically, creating parent directories.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace kiln
