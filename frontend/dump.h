// Kernel dumps: everything a compiled function became, as files.
//   <dir>/<function>/<signature>/
//     00_traced.kir, 01_<pass>.kir ...   the graph after each pass ("unchanged" if so)
//     06_fusion.txt ... 11_accumulate.txt  the schedule's steps (passes/schedule.h):
//                                        groups, folded transposes, collectives, buffers,
//                                        in-place updates, accumulating matmuls
//     kernels/<kernel>.kir .ll .opt.ll .s   kernel IR, LLVM IR before/after O3, assembly
//     kernels/<kernel>.cu .ptx           CUDA plans: generated CUDA C, NVRTC's PTX
//     summary.txt                        kernels in order: nodes, source lines, bytes, flops, time
// Every file is written atomically (runtime/binary_io.h: temporary file, fsync, rename).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct CompileReport;

/// Writes the dump of one compiled signature; returns its directory.
std::string write_dump(const std::string& dir, const std::string& function, const Graph& traced,
                       const CompileReport& report, const std::vector<TensorType>& arg_types);

}  // namespace kiln
