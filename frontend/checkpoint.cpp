// Module weights files: the writer and the strict reader (see checkpoint.h for
// the format; the frame and tensor records come from runtime/binary_io.h).
#include "frontend/checkpoint.h"

#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "frontend/autograd.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "runtime/binary_io.h"

namespace kiln {
namespace {

constexpr io::FrameFormat kFormat{"KILN-WEIGHTS\n", kWeightsFormatVersion, "Kiln weights file",
                                  "entry count"};

// At most this many names in one error message.
constexpr size_t kMaxNamesShown = 8;

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The module's tensors by dotted name, parameters then buffers; undefined ones
// (a buffer registered empty) hold nothing to save, as in PyTorch's state_dict.
NamedTensors named_state(const nn::Module& m, const std::string& who) {
  NamedTensors out;
  for (auto& [name, t] : m.named_parameters())
    if (t.defined()) out.emplace_back(name, t);
  for (auto& [name, t] : m.named_buffers())
    if (t.defined()) out.emplace_back(name, t);
  std::set<std::string_view> seen;
  for (const auto& [name, t] : out)
    KILN_CHECK(seen.insert(name).second, who, ": the module has two tensors named ",
               io::quote_name(name), " (expected each parameter and buffer name once)");
  return out;
}

// The first kMaxNamesShown items joined by `sep`, then "and N more".
std::string join_capped(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < kMaxNamesShown; ++i) out += (i ? sep : "") + items[i];
  if (items.size() > kMaxNamesShown)
    out += sep + std::string("and ") + std::to_string(items.size() - kMaxNamesShown) + " more";
  return out;
}

// Reads `count` entries; throws at the first that is malformed or truncated.
std::vector<io::TensorRecord> read_entries(io::ByteReader& r, uint32_t count) {
  std::vector<io::TensorRecord> out;
  std::map<std::string, size_t> seen;
  for (uint32_t i = 0; i < count; ++i) {
    r.where = "entry " + std::to_string(i) + " of " + std::to_string(count);
    const size_t at = r.pos();
    out.push_back(io::read_tensor_record(r));
    auto [it, fresh] = seen.emplace(out.back().name, i);
    if (!fresh)
      r.malformed(
          "a second entry of this name (the first is entry " + std::to_string(it->second) + ")",
          at);
  }
  return out;
}

}  // namespace

void save(const nn::Module& module, const std::string& path) {
  const std::string who = "save(" + path + ")";
  KILN_CHECK(!current_trace(), who,
             " inside a traced function (expected it outside, where the weights hold data)");
  NamedTensors state = named_state(module, who);
  NoGradGuard no_grad;
  io::ByteWriter w;
  io::begin_frame(w, kFormat, static_cast<uint32_t>(state.size()));
  for (const auto& [name, t] : state) {
    Tensor dense = t.detach().cpu().contiguous();
    io::write_tensor_record(w, name, dense.dtype(), dense.sizes(), dense.impl()->view().data);
  }
  io::end_frame(w, kFormat);
  io::write_file_durable(path, w.str());
}

void load(nn::Module& module, const std::string& path) {
  KILN_CHECK(!current_trace(), "load(module, ", path,
             ") inside a traced function (expected it outside, before tracing)");
  const std::string data = io::read_frame_file(path, kFormat);
  io::Frame frame = io::open_frame(
      path, data, kFormat, [](io::ByteReader& r, uint32_t count) { read_entries(r, count); });
  const std::vector<io::TensorRecord> entries = read_entries(frame.body, frame.count);
  if (frame.body.remaining() != 0)
    frame.body.malformed(std::to_string(frame.body.remaining()) + " bytes after the last entry",
                         frame.body.pos());

  // Every check before any write: a file that does not fit leaves the module as it was.
  NamedTensors state = named_state(module, path);
  std::map<std::string_view, const io::TensorRecord*> in_file;
  for (const io::TensorRecord& e : entries) in_file[e.name] = &e;
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string_view> in_module;
  for (const auto& [name, t] : state) {
    in_module.insert(name);
    auto it = in_file.find(name);
    if (it == in_file.end()) {
      missing.push_back(io::quote_name(name));
      continue;
    }
    const io::TensorRecord& r = *it->second;
    if (r.dtype != t.dtype())
      mismatched.push_back(name + ": the file has dtype " + dtype_name(r.dtype) + ", the module " +
                           dtype_name(t.dtype()));
    else if (r.shape != t.sizes())
      mismatched.push_back(name + ": the file has shape " + shape_str(r.shape) + ", the module " +
                           shape_str(t.sizes()));
  }
  for (const io::TensorRecord& e : entries)
    if (!in_module.count(e.name)) unexpected.push_back(io::quote_name(e.name));
  if (!missing.empty() || !unexpected.empty()) {
    std::string what;
    if (!missing.empty()) what += "missing from the file: " + join_capped(missing, ", ");
    if (!unexpected.empty())
      what += (what.empty() ? "" : "; ") + std::string("not in the module: ") +
              join_capped(unexpected, ", ");
    throw Error(path + ": the names in the file do not match the module's (" + what +
                "; expected a file saved from a module of the same structure)");
  }
  if (!mismatched.empty()) throw Error(path + ": " + join_capped(mismatched, "; "));

  NoGradGuard no_grad;
  for (auto& [name, t] : state) {
    const io::TensorRecord& r = *in_file.at(name);
    Tensor host = empty(r.shape, TensorOptions(r.dtype));
    if (!r.data.empty()) std::memcpy(host.impl()->view().data, r.data.data(), r.data.size());
    t.copy_(t.device() == host.device() ? host : host.to(t.device()));
  }
}

}  // namespace kiln
