// Saved-graph files: writer, strict reader and the callable loaded function
// (see serialize.h for the format).
#include "frontend/serialize.h"

#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

#include "codegen/compile.h"
#include "frontend/autograd.h"
#include "frontend/settings.h"
#include "frontend/jit.h"
#include "frontend/run_plan.h"
#include "frontend/tensor_impl.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/binary_io.h"

namespace kiln {
namespace {

constexpr io::FrameFormat kFormat{"KILN-GRAPH\n", kGraphFormatVersion, "Kiln graph file",
                                  "section count"};

// ---------------------------------------------------------------- writing

size_t begin_section(io::ByteWriter& w, const char tag[5]) {
  w.bytes(tag, 4);
  size_t at = w.size();
  w.u64(0);
  return at;
}

void end_section(io::ByteWriter& w, size_t at) {
  w.patch_u64(at, w.size() - at - 8);
}

std::vector<NodeId> dense_inputs(const Graph& g, bool params, const char* who) {
  std::vector<NodeId> ids = params ? g.params() : g.args();
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t idx = g[ids[i]].attrs.i(AttrKey::index);
    KILN_CHECK(idx == static_cast<int64_t>(i), who, ": the graph's ", params ? "param" : "arg",
               " indices are not 0..", ids.size() - 1, " (found index ", idx, " at position ", i,
               ")");
  }
  return ids;
}

// ---------------------------------------------------------------- reading

struct RawParam : io::TensorRecord {
  uint64_t index = 0;
  size_t offset = 0;  // of the section
};

struct RawFile {
  std::string name;
  std::string_view graph_text;
  size_t graph_offset = 0;
  std::vector<RawParam> params;
};

RawParam read_param(io::ByteReader& r, size_t number) {
  r.where = "parameter " + std::to_string(number);
  uint64_t index = r.u(8, "index");
  RawParam p{io::read_tensor_record(r)};
  p.index = index;
  return p;
}

// Walks the sections from the end of the header; with `exact`, they must end at `r`'s end.
RawFile read_sections(io::ByteReader& r, uint32_t count, bool exact) {
  RawFile f;
  bool have_graph = false;
  for (uint32_t s = 0; s < count; ++s) {
    r.where = "section " + std::to_string(s) + " of " + std::to_string(count);
    size_t at = r.pos();
    std::string tag(r.bytes(4, "section tag"));
    uint64_t len = r.u(8, "section length");
    size_t start = r.pos();
    if (tag == "META") {
      r.where = "the metadata section";
      std::string_view text = r.bytes(len, "metadata");
      size_t b = 0;
      while (b < text.size()) {
        size_t e = text.find('\n', b);
        if (e == std::string_view::npos) e = text.size();
        std::string_view line = text.substr(b, e - b);
        if (line.starts_with("name=")) f.name = std::string(line.substr(5));
        b = e + 1;
      }
    } else if (tag == "GRPH") {
      r.where = "the graph section";
      if (have_graph) r.malformed("a second graph section", at);
      have_graph = true;
      f.graph_offset = start;
      f.graph_text = r.bytes(len, "IR text");
    } else if (tag == "PARM") {
      f.params.push_back(read_param(r, f.params.size()));
      f.params.back().offset = at;
      if (r.pos() - start != len)
        r.malformed("the section length says " + std::to_string(len) + " bytes, its fields take " +
                        std::to_string(r.pos() - start),
                    at);
    } else {
      r.malformed("unknown section tag " + io::quote_name(tag), at);
    }
  }
  if (exact && r.remaining() != 0)
    r.malformed(std::to_string(r.remaining()) + " bytes after the last section", r.pos());
  if (exact && !have_graph) r.fail("the file has no graph section");
  return f;
}

Tensor make_param(const RawParam& p) {
  NoGradGuard no_grad;
  Tensor t = empty(p.shape, TensorOptions(p.dtype));
  if (!p.data.empty()) std::memcpy(t.impl()->view().data, p.data.data(), p.data.size());
  return t;
}

}  // namespace

void save_graph(const std::string& path, const Graph& g, const std::vector<Tensor>& params,
                const SaveOptions& opts) {
  const std::string who = "save_graph(" + path + ")";
  try {
    verify(g);
  } catch (const Error& e) {
    throw Error(who + ": the graph does not verify: " + e.what());
  }
  for (NodeId id = 0; id < g.size(); ++id)
    if (g[id].op == OpKind::custom)
      throw Error(who + ": node %" + std::to_string(id) +
                      " calls a custom function, whose code cannot be saved (expected a graph of "
                      "built-in ops only)",
                  g[id].loc);
  dense_inputs(g, false, who.c_str());
  std::vector<NodeId> pids = dense_inputs(g, true, who.c_str());
  KILN_CHECK(params.size() == pids.size(), who, ": the graph has ", pids.size(),
             " parameters, got ", params.size(), " tensors");

  io::ByteWriter w;
  io::begin_frame(w, kFormat, static_cast<uint32_t>(2 + params.size()));

  size_t s = begin_section(w, "META");
  std::string name = opts.name;
  for (char& c : name)
    if (c == '\n' || c == '\r') c = ' ';
  w.bytes("producer=kiln\nname=" + name + "\n");
  end_section(w, s);

  s = begin_section(w, "GRPH");
  PrintOptions po;
  po.locations = true;
  w.bytes(print_graph(g, po));
  end_section(w, s);

  NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& n = g[pids[i]];
    const Tensor& t = params[i];
    KILN_CHECK(t.defined(), who, ": parameter ", i, " is an undefined tensor");
    KILN_CHECK(!t.is_symbolic(), who, ": parameter ", i,
               " is a symbolic tensor (save_graph cannot be called inside a trace)");
    KILN_CHECK(t.dtype() == n.type().dtype && t.sizes() == n.type().shape, who, ": parameter ", i,
               " is ", dtype_name(t.dtype()), shape_str(t.sizes()), ", expected ", n.type().str(),
               " (the param node's type)");
    Tensor dense = t.detach().cpu().contiguous();
    s = begin_section(w, "PARM");
    w.u64(i);
    std::string pname = n.attrs.has(AttrKey::name) ? n.attrs.str(AttrKey::name) : "";
    io::write_tensor_record(w, pname, n.type().dtype, n.type().shape, dense.impl()->view().data);
    end_section(w, s);
  }
  io::end_frame(w, kFormat);
  io::write_file_durable(path, w.str());
}

SavedGraph load_graph(const std::string& path) {
  const std::string data = io::read_frame_file(path, kFormat);
  io::Frame frame = io::open_frame(path, data, kFormat, [](io::ByteReader& r, uint32_t count) {
    read_sections(r, count, false);
  });
  RawFile raw = read_sections(frame.body, frame.count, true);

  SavedGraph out;
  out.name = raw.name;
  try {
    out.graph = parse_graph(raw.graph_text, "graph", true);
    verify(out.graph);
  } catch (const Error& e) {
    throw Error(path + ": the graph section (byte " + std::to_string(raw.graph_offset) +
                ") is invalid: " + e.what());
  }
  const Graph& g = out.graph;
  for (NodeId id = 0; id < g.size(); ++id)
    if (g[id].op == OpKind::custom)
      throw Error(path + ": the graph calls a custom function (node %" + std::to_string(id) +
                  "), which a saved graph cannot hold");
  dense_inputs(g, false, path.c_str());
  std::vector<NodeId> pids = dense_inputs(g, true, path.c_str());
  if (raw.params.size() != pids.size())
    throw Error(path + ": the graph has " + std::to_string(pids.size()) +
                " parameters, the file holds data for " + std::to_string(raw.params.size()));
  for (size_t i = 0; i < pids.size(); ++i) {
    const Node& n = g[pids[i]];
    const RawParam& p = raw.params[i];
    std::string at = path + ": parameter " + std::to_string(i) + " (section at byte " +
                     std::to_string(p.offset) + ")";
    std::string want_name = n.attrs.has(AttrKey::name) ? n.attrs.str(AttrKey::name) : "";
    if (p.index != i)
      throw Error(at + " has index " + std::to_string(p.index) + ", expected " + std::to_string(i));
    if (p.name != want_name)
      throw Error(at + " is named " + io::quote_name(p.name) + ", the graph's param " +
                  std::to_string(i) + " is named " + io::quote_name(want_name));
    if (p.dtype != n.type().dtype || p.shape != n.type().shape)
      throw Error(at + " is " + TensorType{p.dtype, p.shape, {}}.str() + ", the graph expects " +
                  n.type().str());
    out.params.push_back(make_param(p));
  }
  return out;
}

// ---------------------------------------------------------------- LoadedFunction

struct LoadedFunction::State {
  Graph graph;
  std::vector<Tensor> params;
  std::string name, origin;
  std::vector<TensorType> arg_types, out_types;
  int fusion = -1;  // -1: follow fusion_enabled()
  std::mutex mu;
  std::shared_ptr<Plan> plan;
  bool plan_fusion = true;
};

LoadedFunction::LoadedFunction(SavedGraph saved, std::string origin)
    : s_(std::make_shared<State>()) {
  State& s = *s_;
  s.graph = std::move(saved.graph);
  s.params = std::move(saved.params);
  s.origin = std::move(origin);
  s.name = saved.name.empty() ? std::filesystem::path(s.origin).stem().string() : saved.name;
  // The caller passes arguments by position and parameters by index: each
  // index must name exactly one slot (a parsed or damaged graph may not).
  const std::vector<NodeId> args = s.graph.args();
  s.arg_types.resize(args.size());
  std::vector<char> seen(args.size(), 0);
  for (NodeId id : args) {
    const int64_t i = s.graph[id].attrs.i(AttrKey::index);
    if (i < 0 || i >= static_cast<int64_t>(args.size()) || seen[static_cast<size_t>(i)])
      throw Error(s.origin + ": arg index " + std::to_string(i) + " of %" + std::to_string(id) +
                  " (expected the " + std::to_string(args.size()) +
                  " args to have the indices 0.." + std::to_string(args.size() - 1) + ", once each)");
    seen[static_cast<size_t>(i)] = 1;
    s.arg_types[static_cast<size_t>(i)] = s.graph[id].type();
  }
  std::vector<char> param_seen(s.params.size(), 0);
  for (NodeId id : s.graph.params()) {
    const int64_t i = s.graph[id].attrs.i(AttrKey::index);
    if (i < 0 || i >= static_cast<int64_t>(s.params.size()) || param_seen[static_cast<size_t>(i)])
      throw Error(s.origin + ": param index " + std::to_string(i) + " of %" + std::to_string(id) +
                  " (expected an index below the " + std::to_string(s.params.size()) +
                  " parameters given, once each)");
    param_seen[static_cast<size_t>(i)] = 1;
  }
  for (Value v : s.graph.outputs) s.out_types.push_back(s.graph.type(v));
}

const Graph& LoadedFunction::graph() const {
  KILN_CHECK(s_, "LoadedFunction: empty (expected one from kiln::load)");
  return s_->graph;
}
const std::vector<Tensor>& LoadedFunction::params() const {
  KILN_CHECK(s_, "LoadedFunction: empty (expected one from kiln::load)");
  return s_->params;
}
std::vector<TensorType> LoadedFunction::arg_types() const {
  return s_ ? s_->arg_types : std::vector<TensorType>{};
}
std::vector<TensorType> LoadedFunction::output_types() const {
  return s_ ? s_->out_types : std::vector<TensorType>{};
}
const std::string& LoadedFunction::name() const {
  KILN_CHECK(s_, "LoadedFunction: empty (expected one from kiln::load)");
  return s_->name;
}
void LoadedFunction::set_fusion(bool on) const {
  KILN_CHECK(s_, "LoadedFunction: empty (expected one from kiln::load)");
  s_->fusion = on ? 1 : 0;
}

std::vector<Tensor> LoadedFunction::operator()(const std::vector<Tensor>& args) const {
  KILN_CHECK(s_, "LoadedFunction: empty (expected one from kiln::load)");
  State& s = *s_;
  auto types_str = [&] {
    std::string out;
    for (const TensorType& t : s.arg_types) out += (out.empty() ? "" : ", ") + t.str();
    return out;
  };
  KILN_CHECK(args.size() == s.arg_types.size(), s.origin, ": expected ", s.arg_types.size(),
             " arguments (", types_str(), "), got ", args.size());
  NoGradGuard no_grad;
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor& t = args[i];
    KILN_CHECK(t.defined(), s.origin, ": argument ", i, " is an undefined tensor");
    KILN_CHECK(!t.is_symbolic(), s.origin, ": argument ", i,
               " is symbolic (a loaded graph cannot be called inside a trace)");
    const TensorType& have = t.impl()->type;
    KILN_CHECK(have == s.arg_types[i], s.origin, ": argument ", i, " is ", have.str(),
               ", expected ", s.arg_types[i].str(),
               " (a saved graph runs only on the argument types it was traced with)");
  }
  std::shared_ptr<Plan> plan;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    bool fusion = s.fusion >= 0 ? s.fusion == 1 : fusion_enabled();
    if (!s.plan || s.plan_fusion != fusion) {
      CompileOptions opts = compile_options();
      opts.fusion = fusion;
      s.plan = compile_graph(s.graph, opts);
      s.plan_fusion = fusion;
    }
    plan = s.plan;
  }
  std::vector<std::shared_ptr<TensorImpl>> params;
  for (const Tensor& p : s.params) params.push_back(p.impl_ptr());
  return detail::run_plan(*plan, s.graph, args, params, "loaded graph", s.origin, SourceLoc{});
}

LoadedFunction load(const std::string& path) {
  return LoadedFunction(load_graph(path), path);
}

}  // namespace kiln
