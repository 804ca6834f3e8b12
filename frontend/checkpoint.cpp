// Weights, optimizer and checkpoint files: the writer and the strict reader
// (see checkpoint.h for the formats; the frame and tensor records come from
// runtime/binary_io.h). Each file is a list of named tensors; loading checks
// the whole file against what it loads into before it writes anything.
#include "frontend/checkpoint.h"

#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "frontend/autograd.h"
#include "frontend/random_internal.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "runtime/binary_io.h"

namespace kiln {
namespace {

constexpr io::FrameFormat kWeights{"KILN-WEIGHTS\n", kWeightsFormatVersion, "Kiln weights file",
                                   "entry count"};
constexpr io::FrameFormat kOptimizer{"KILN-OPTIMIZER\n", kOptimizerFormatVersion,
                                     "Kiln optimizer file", "entry count"};
constexpr io::FrameFormat kCheckpoint{"KILN-CHECKPOINT\n", kCheckpointFormatVersion,
                                      "Kiln checkpoint file", "entry count"};

// Entry name prefixes of a checkpoint.
constexpr std::string_view kModulePrefix = "module.", kOptimizerPrefix = "optimizer.",
                           kRngPrefix = "rng.";
constexpr std::string_view kRngSeed = "rng.seed";

// At most this many names in one error message.
constexpr size_t kMaxNamesShown = 8;

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
// A file's entries of one part, by name (without the part's prefix), in file order.
struct Entries {
  std::vector<std::pair<std::string, const io::TensorRecord*>> in_order;
  std::map<std::string, const io::TensorRecord*, std::less<>> by_name;
  bool empty() const { return in_order.empty(); }
  const io::TensorRecord& at(std::string_view name) const { return *by_name.find(name)->second; }
};

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

// The optimizer's state tensors as "state.<i>"; the learning rate is an entry
// of its own ("lr"), written and read apart from these.
NamedTensors optimizer_state(const optim::Optimizer& o) {
  NamedTensors out;
  const std::vector<Tensor> s = o.state();
  for (size_t i = 0; i < s.size(); ++i) out.emplace_back("state." + std::to_string(i), s[i]);
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

// Every entry of `data`, the bytes of the file `path` in format f, checked
// (frame, records, no bytes after the last entry). The records view `data`.
std::vector<io::TensorRecord> file_entries(const std::string& path, std::string_view data,
                                           const io::FrameFormat& f) {
  io::Frame frame = io::open_frame(
      path, data, f, [](io::ByteReader& r, uint32_t count) { read_entries(r, count); });
  std::vector<io::TensorRecord> entries = read_entries(frame.body, frame.count);
  if (frame.body.remaining() != 0)
    frame.body.malformed(std::to_string(frame.body.remaining()) + " bytes after the last entry",
                         frame.body.pos());
  return entries;
}

// Appends the tensors, their names prefixed, as dense host records.
void write_named(io::ByteWriter& w, std::string_view prefix, const NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) {
    Tensor dense = t.detach().cpu().contiguous();
    io::write_tensor_record(w, std::string(prefix) + name, dense.dtype(), dense.sizes(),
                            dense.impl()->view().data);
  }
}

// Writes the file: a frame of format f around `count` entries that `body` appends.
template <class Body>
void write_file(const std::string& path, const io::FrameFormat& f, size_t count, Body body) {
  io::ByteWriter w;
  io::begin_frame(w, f, static_cast<uint32_t>(count));
  body(w);
  io::end_frame(w, f);
  io::write_file_durable(path, w.str());
}

// 0-d f64 tensors holding the learning rates, as files store them: "lr" (the
// first group's), then "lr.group<g>" for each further group.
NamedTensors lr_entry(const optim::Optimizer& o) {
  NamedTensors out;
  const std::vector<optim::OptimizerParamGroup>& groups = o.param_groups();
  for (size_t g = 0; g < groups.size(); ++g)
    out.emplace_back(g == 0 ? std::string("lr") : "lr.group" + std::to_string(g),
                     scalar_tensor(Scalar(groups[g].options().get_lr()), TensorOptions(kFloat64)));
  return out;
}

// The entries whose names start with `prefix`, by name without it. Entries
// claimed here are added to `claimed`.
Entries with_prefix(const std::vector<io::TensorRecord>& entries, std::string_view prefix,
                    std::set<std::string_view>& claimed) {
  Entries out;
  for (const io::TensorRecord& e : entries)
    if (std::string_view(e.name).starts_with(prefix)) {
      out.in_order.emplace_back(e.name.substr(prefix.size()), &e);
      out.by_name.emplace(out.in_order.back());
      claimed.insert(e.name);
    }
  return out;
}

// Checks that the file's entries `in_file` are exactly `want` (names, dtypes,
// shapes), `owner` ("module", "optimizer") naming what they load into.
void check_match(const std::string& path, const Entries& in_file, const NamedTensors& want,
                 const char* owner, const char* same) {
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string_view> in_owner;
  for (const auto& [name, t] : want) {
    in_owner.insert(name);
    auto it = in_file.by_name.find(name);
    if (it == in_file.by_name.end()) {
      missing.push_back(io::quote_name(name));
      continue;
    }
    const io::TensorRecord& r = *it->second;
    if (r.dtype != t.dtype())
      mismatched.push_back(name + ": the file has dtype " + dtype_name(r.dtype) + ", the " + owner +
                           " " + dtype_name(t.dtype()));
    else if (r.shape != t.sizes())
      mismatched.push_back(name + ": the file has shape " + shape_str(r.shape) + ", the " + owner +
                           " " + shape_str(t.sizes()));
  }
  for (const auto& [name, r] : in_file.in_order)
    if (!in_owner.count(name)) unexpected.push_back(io::quote_name(name));
  if (!missing.empty() || !unexpected.empty()) {
    std::string what;
    if (!missing.empty()) what += "missing from the file: " + join_capped(missing, ", ");
    if (!unexpected.empty())
      what += (what.empty() ? "" : "; ") + std::string("not in the ") + owner + ": " +
              join_capped(unexpected, ", ");
    throw Error(path + ": the names in the file do not match the " + owner + "'s (" + what +
                "; expected a file saved from " + same + ")");
  }
  if (!mismatched.empty()) throw Error(path + ": " + join_capped(mismatched, "; "));
}

constexpr const char* kSameModule = "a module of the same structure";
constexpr const char* kSameOptimizer =
    "an optimizer of the same kind and options over parameters of the same shapes";

// Copies each checked record into its tensor, in place (through the host for
// other devices).
void copy_in(const Entries& in_file, const NamedTensors& into) {
  NoGradGuard no_grad;
  for (const auto& [name, t] : into) {
    const io::TensorRecord& r = in_file.at(name);
    Tensor host = empty(r.shape, TensorOptions(r.dtype));
    if (!r.data.empty()) std::memcpy(host.impl()->view().data, r.data.data(), r.data.size());
    Tensor(t).copy_(t.device() == host.device() ? host : host.to(t.device()));
  }
}

// Sets a loaded optimizer's learning rates from its checked lr entries.
void set_lrs(const Entries& in_file, optim::Optimizer& o) {
  std::vector<optim::OptimizerParamGroup>& groups = o.param_groups();
  const NamedTensors names = lr_entry(o);
  for (size_t g = 0; g < groups.size(); ++g) {
    double lr = 0;
    std::memcpy(&lr, in_file.at(names[g].first).data.data(), sizeof lr);
    groups[g].options().set_lr(lr);
  }
}

// The optimizer's entries (state and lr) against the file's.
void check_optimizer(const std::string& path, const Entries& in_file, const optim::Optimizer& o) {
  NamedTensors want = optimizer_state(o);
  for (auto& entry : lr_entry(o)) want.push_back(entry);
  check_match(path, in_file, want, "optimizer", kSameOptimizer);
}

void load_optimizer(const Entries& in_file, optim::Optimizer& o) {
  copy_in(in_file, optimizer_state(o));
  set_lrs(in_file, o);
}

// The default generators' states from a checkpoint's "rng." entries, checked.
detail::DefaultRngStates read_rng(const std::string& path, const Entries& in_file) {
  auto bad = [&](const std::string& what) {
    throw Error(path + ": " + what +
                " (expected rng.seed, an i64 scalar, and rng.<device> entries, i64[2], as "
                "save_checkpoint writes)");
  };
  detail::DefaultRngStates s;
  for (const auto& [name, r] : in_file.in_order) {
    if (r->dtype != DType::i64) bad("rng." + name + " has dtype " + dtype_name(r->dtype));
    if (name == "seed") {
      if (!r->shape.empty()) bad("rng.seed has shape " + shape_str(r->shape));
      std::memcpy(&s.seed, r->data.data(), sizeof s.seed);
      continue;
    }
    const std::optional<Device> d = Device::parse(name);
    if (!d) bad("an entry for an unknown device, " + io::quote_name("rng." + name));
    if (r->shape != Shape{2}) bad("rng." + name + " has shape " + shape_str(r->shape));
    Tensor state = empty({2}, TensorOptions(kInt64));
    std::memcpy(state.impl()->view().data, r->data.data(), r->data.size());
    s.states.emplace_back(*d, state);
  }
  if (!in_file.by_name.count("seed")) bad("no rng.seed entry");
  return s;
}

}  // namespace

void save(const nn::Module& module, const std::string& path) {
  const std::string who = "save(" + path + ")";
  KILN_CHECK(!current_trace(), who,
             " inside a traced function (expected it outside, where the weights hold data)");
  const NamedTensors state = named_state(module, who);
  write_file(path, kWeights, state.size(), [&](io::ByteWriter& w) { write_named(w, "", state); });
}

void load(nn::Module& module, const std::string& path) {
  KILN_CHECK(!current_trace(), "load(module, ", path,
             ") inside a traced function (expected it outside, before tracing)");
  const std::string data = io::read_frame_file(path, kWeights);
  const std::vector<io::TensorRecord> entries = file_entries(path, data, kWeights);
  std::set<std::string_view> claimed;
  const Entries in_file = with_prefix(entries, "", claimed);
  // Every check before any write: a file that does not fit leaves the module as it was.
  const NamedTensors state = named_state(module, path);
  check_match(path, in_file, state, "module", kSameModule);
  copy_in(in_file, state);
}

void save(const optim::Optimizer& optimizer, const std::string& path) {
  KILN_CHECK(!current_trace(), "save(optimizer, ", path,
             ") inside a traced function (expected it outside, where the state holds data)");
  const NamedTensors state = optimizer_state(optimizer), lr = lr_entry(optimizer);
  write_file(path, kOptimizer, state.size() + lr.size(), [&](io::ByteWriter& w) {
    write_named(w, "", state);
    write_named(w, "", lr);
  });
}

void load(optim::Optimizer& optimizer, const std::string& path) {
  KILN_CHECK(!current_trace(), "load(optimizer, ", path,
             ") inside a traced function (expected it outside, before tracing)");
  const std::string data = io::read_frame_file(path, kOptimizer);
  const std::vector<io::TensorRecord> entries = file_entries(path, data, kOptimizer);
  std::set<std::string_view> claimed;
  const Entries in_file = with_prefix(entries, "", claimed);
  check_optimizer(path, in_file, optimizer);
  load_optimizer(in_file, optimizer);
}

void detail::save_checkpoint(const std::string& path, const nn::Module& module,
                             const optim::Optimizer* optimizer) {
  const std::string who = "save_checkpoint(" + path + ")";
  KILN_CHECK(!current_trace(), who,
             " inside a traced function (expected it outside, where the state holds data)");
  const NamedTensors weights = named_state(module, who);
  NamedTensors opt;
  if (optimizer) {
    opt = optimizer_state(*optimizer);
    for (auto& entry : lr_entry(*optimizer)) opt.push_back(entry);
  }
  const DefaultRngStates rng = default_rng_states();
  NamedTensors rng_entries{
      {"seed", scalar_tensor(Scalar(static_cast<long long>(rng.seed)), TensorOptions(kInt64))}};
  for (const auto& [device, state] : rng.states) rng_entries.emplace_back(device.str(), state);
  const size_t count = weights.size() + opt.size() + rng_entries.size();
  write_file(path, kCheckpoint, count, [&](io::ByteWriter& w) {
    write_named(w, kModulePrefix, weights);
    write_named(w, kOptimizerPrefix, opt);
    write_named(w, kRngPrefix, rng_entries);
  });
}

void detail::load_checkpoint(const std::string& path, nn::Module& module,
                             optim::Optimizer* optimizer) {
  KILN_CHECK(!current_trace(), "load_checkpoint(", path,
             ") inside a traced function (expected it outside, before tracing)");
  const std::string data = io::read_frame_file(path, kCheckpoint);
  const std::vector<io::TensorRecord> entries = file_entries(path, data, kCheckpoint);
  std::set<std::string_view> claimed;
  const Entries weights = with_prefix(entries, kModulePrefix, claimed);
  const Entries opt = with_prefix(entries, kOptimizerPrefix, claimed);
  const Entries rng = with_prefix(entries, kRngPrefix, claimed);
  std::vector<std::string> other;
  for (const io::TensorRecord& e : entries)
    if (!claimed.count(e.name)) other.push_back(io::quote_name(e.name));
  if (!other.empty())
    throw Error(path + ": entries of no part of a checkpoint: " + join_capped(other, ", ") +
                " (expected names that start with module., optimizer. or rng.)");

  // Every check before any write.
  const NamedTensors state = named_state(module, path);
  check_match(path, weights, state, "module", kSameModule);
  if (optimizer) {
    if (opt.empty())
      throw Error(path +
                  ": the checkpoint has no optimizer state (expected one saved with an "
                  "optimizer, or load_checkpoint(path, module) without one)");
    check_optimizer(path, opt, *optimizer);
  } else if (!opt.empty()) {
    throw Error(path +
                ": the checkpoint has an optimizer's state (expected load_checkpoint(path, "
                "module, optimizer) to load it)");
  }
  const DefaultRngStates rng_states = read_rng(path, rng);

  copy_in(weights, state);
  if (optimizer) load_optimizer(opt, *optimizer);
  set_default_rng_states(rng_states, Loc::current());
}

}  // namespace kiln
