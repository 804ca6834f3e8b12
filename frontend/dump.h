// Kernel dumps: everything a compiled function became, as files.
//   <dir>/<function>/<signature>/
//     00_traced.kir                      the graph as traced
//     01_partition.kir                   the forward, and the backward as comments, of a
//                                        call whose outputs require grad (passes/partition.h)
//     02_simplify.kir ... 08_<pass>.kir  the graph after each pass ("unchanged" if so)
//     09_fusion.txt ... 15_accumulate.txt  the schedule's steps (passes/schedule.h) and the
//                                        lower stage: groups, folded transposes, collectives,
//                                        buffers, outputs kernels may store over inputs,
//                                        in-place updates, accumulating matmuls
//     kernels/<kernel>.kir .ll .opt.ll .s   kernel IR, LLVM IR before/after O3, assembly
//     kernels/<kernel>.cu .ptx           CUDA plans: generated CUDA C, NVRTC's PTX
//     summary.txt                        kernels in order: nodes, source lines, bytes, flops, time
//     traced.dot optimized.dot fused.dot  Graphviz pictures (ir/dot.h): the traced graph, the
//                                        graph after the pipeline, the kernels as clusters;
//                                        with an .svg of each when Graphviz's `dot` is installed
// Every file is written atomically (runtime/binary_io.h: temporary file, fsync, rename).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct CompileReport;

/// Writes the dump of one compiled signature; returns its directory.
std::string write_dump(const std::string& dir, const std::string& function, const Graph& traced,
                       const CompileReport& report, const std::vector<TensorType>& arg_types);

/// Writes the pictures of one compile into `dir`: traced.dot (`traced`),
/// optimized.dot and fused.dot (report.optimized, one cluster per plan step,
/// labelled with its name, bytes and flops), and an .svg of each rendered by
/// Graphviz's `dot` when it is on the PATH (graphs of more than
/// kMaxRenderedNodes nodes are left to the user). `title` heads each picture.
/// Returns one line saying what was written ("pictures: traced.svg ...", or why
/// there is no svg).
std::string write_graph_pictures(const std::string& dir, const std::string& title,
                                 const Graph& traced, const CompileReport& report);

/// The compiled graph (report.optimized) with one cluster per plan step: the
/// picture fused.dot holds (with fusion off, every op its own step).
std::string kernels_dot(const CompileReport& report, const std::string& title);

/// Writes `dot` to <stem>.dot and, when Graphviz's `dot` is installed and the
/// graph has at most kMaxRenderedNodes nodes, <stem>.svg; returns the files'
/// names, or "<stem>.dot (no svg: <why>)".
std::string write_picture(const std::string& stem, const std::string& dot, size_t nodes);

/// The most nodes a picture rendered to svg by the dumps has (`dot` takes seconds
/// beyond; the .dot file is written at any size).
inline constexpr size_t kMaxRenderedNodes = 600;

/// The svg `dot` renders from a dot file, or "" with *why set (`dot` not
/// installed, failed, or still laying out after `seconds`: it is killed).
/// `program`: a dot to run instead of the one on the PATH.
std::string render_svg(const std::string& dot_path, std::string* why, int seconds = 20,
                       const std::string& program = "");

}  // namespace kiln
