// The `kiln` command line: runs, dumps and explains graphs saved with
// kiln::save_graph (frontend/serialize.h), with no original code.
//   kiln run FILE --input x.npy ... [--output-dir D | --output out.npy ...]
//   kiln dump FILE --dir D [--no-fusion]
//   kiln explain FILE [--no-color]
// Exit codes: 0 success, 1 runtime error, 2 usage error; errors go to stderr.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include "codegen/compile.h"
#include "frontend/dump.h"
#include "frontend/npy.h"
#include "frontend/serialize.h"
#include "runtime/binary_io.h"
#include "tools/commands.h"

namespace kiln::cli {
namespace fs = std::filesystem;

std::string types_str(const std::vector<std::string>& types) {
  std::string out = "(";
  for (size_t i = 0; i < types.size(); ++i) out += (i ? ", " : "") + types[i];
  return out + ")";
}

namespace {

std::string type_of(const Tensor& t) {
  return TensorType{t.dtype(), t.sizes(), t.device()}.str();
}

// The first few elements: "[0.5, 1.25, -3, ...] (12 elements)".
std::string preview(const Tensor& t) {
  constexpr int64_t kShown = 6;
  std::vector<double> v = t.numel() == 0 ? std::vector<double>{} : t.to_vector<double>();
  std::ostringstream os;
  os.precision(6);
  os << "[";
  for (int64_t i = 0; i < std::min<int64_t>(t.numel(), kShown); ++i) {
    if (i) os << ", ";
    if (t.dtype() == DType::b8)
      os << (v[static_cast<size_t>(i)] != 0 ? "true" : "false");
    else
      os << v[static_cast<size_t>(i)];
  }
  if (t.numel() > kShown) os << ", ...";
  os << "] (" << t.numel() << (t.numel() == 1 ? " element)" : " elements)");
  return os.str();
}

}  // namespace

int run(const RunOptions& o) {
  LoadedFunction f = load(o.file);
  std::vector<TensorType> want = f.arg_types();
  std::vector<std::string> want_s;
  for (const TensorType& t : want) want_s.push_back(t.str());
  if (o.inputs.size() != want.size())
    throw Error(o.file + ": the graph takes " + std::to_string(want.size()) + " argument" +
                (want.size() == 1 ? " " : "s ") + types_str(want_s) + ", got " +
                std::to_string(o.inputs.size()) + " --input file" +
                (o.inputs.size() == 1 ? "" : "s"));
  std::vector<Tensor> args;
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    Tensor t = read_npy(o.inputs[i]);
    if (t.dtype() != want[i].dtype || t.sizes() != want[i].shape)
      throw Error(o.inputs[i] + " (--input " + std::to_string(i) + ") is " + type_of(t) +
                  ", the graph's argument " + std::to_string(i) + " is " + want[i].str());
    args.push_back(std::move(t));
  }
  // Where the outputs go, checked before the graph runs: a count that does not
  // match, or a path that is not a regular file (a device, a FIFO), is refused.
  const size_t n_out = f.output_types().size();
  if (!o.outputs.empty() && o.outputs.size() != n_out)
    throw Error(o.file + ": the graph returns " + std::to_string(n_out) + " output" +
                (n_out == 1 ? "" : "s") + ", got " + std::to_string(o.outputs.size()) +
                " --output file" + (o.outputs.size() == 1 ? "" : "s"));
  std::vector<std::string> paths;
  for (size_t i = 0; i < n_out; ++i) {
    std::string file = "out" + std::to_string(i) + ".npy";
    paths.push_back(!o.outputs.empty()     ? o.outputs[i]
                    : o.output_dir.empty() ? file
                                           : (fs::path(o.output_dir) / file).string());
    io::check_write_target(paths.back());
  }
  std::vector<Tensor> outs = f(args);
  for (size_t i = 0; i < outs.size(); ++i) {
    write_npy(paths[i], outs[i]);
    std::cout << "output " << i << ": " << type_of(outs[i]) << " -> " << paths[i] << "\n  "
              << preview(outs[i]) << "\n";
  }
  if (!f.graph().updates.empty())
    std::cout << "note: the graph updated " << f.graph().updates.size()
              << " parameter(s) in memory; the file is unchanged\n";
  return 0;
}

int dump(const DumpOptions& o) {
  SavedGraph sg = load_graph(o.file);
  std::string name = sg.name.empty() ? fs::path(o.file).stem().string() : sg.name;
  CompileOptions opts;
  opts.fusion = o.fusion;
  opts.want_artifacts = true;  // and no disk cache: every kernel's texts are produced
  CompileReport report;
  compile_graph(sg.graph, opts, &report);
  std::vector<TensorType> arg_types;
  for (NodeId id : sg.graph.args()) arg_types.push_back(sg.graph[id].type());
  std::string where = write_dump(o.dir, name, sg.graph, report, arg_types);
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(where)) files += e.is_regular_file();
  std::cout << "wrote " << files << " files to " << where << " (" << report.kernels.size()
            << " kernels, fusion " << (o.fusion ? "on" : "off") << ")\n";
  return 0;
}

}  // namespace kiln::cli

int main(int argc, char** argv) {
  using namespace kiln::cli;
  CLI::App app{"Runs, dumps and explains graphs saved with kiln::save_graph, without their code.",
               "kiln"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");

  RunOptions ro;
  auto* run_cmd = app.add_subcommand("run", "Run a saved graph on .npy inputs, write .npy outputs");
  run_cmd->add_option("file", ro.file, "Saved graph (.kiln)")->required();
  run_cmd->add_option("-i,--input", ro.inputs, "Input .npy file, one per argument, in order")
      ->take_all();
  auto* out_opt = run_cmd->add_option("-o,--output", ro.outputs,
                                      "Output .npy file, one per output (default out0.npy, ...)");
  auto* dir_opt =
      run_cmd->add_option("--output-dir", ro.output_dir, "Directory for out0.npy, out1.npy, ...");
  out_opt->excludes(dir_opt);

  DumpOptions dopt;
  bool no_fusion = false;
  auto* dump_cmd = app.add_subcommand(
      "dump", "Write every compile artefact (graph after each pass, kernels, assembly)");
  dump_cmd->add_option("file", dopt.file, "Saved graph (.kiln)")->required();
  dump_cmd->add_option("-d,--dir", dopt.dir, "Directory to write the dump into")->required();
  dump_cmd->add_flag("--no-fusion", no_fusion, "One kernel per op (the unfused baseline)");

  ExplainOptions eo;
  bool no_color = false;
  auto* explain_cmd = app.add_subcommand(
      "explain", "Show what each pass did and the kernels, fused against unfused");
  explain_cmd->add_option("file", eo.file, "Saved graph (.kiln)")->required();
  explain_cmd->add_flag("--no-color", no_color, "Plain text (also when NO_COLOR is set)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "kiln: error: " << e.what() << "\n"
              << "Run 'kiln --help' or 'kiln COMMAND --help' for usage.\n";
    return 2;
  }
  try {
    if (*run_cmd) return run(ro);
    if (*dump_cmd) {
      dopt.fusion = !no_fusion;
      return dump(dopt);
    }
    eo.color = !no_color && std::getenv("NO_COLOR") == nullptr && ::isatty(STDOUT_FILENO);
    return explain(eo);
  } catch (const std::exception& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  }
}
