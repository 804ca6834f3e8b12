// Archives (see archive.h for the format), and the members that save modules
// and optimizers into them: nn::Module::save/load (parameters and buffers by
// name, children as nested archives, as libtorch's) and
// optim::Optimizer::save/load (its kind, learning rate, hyperparameters and
// every state tensor, restored in place).
#include "frontend/archive.h"

#include <algorithm>

#include <cstring>
#include <istream>
#include <iterator>
#include <ostream>
#include <sstream>

#include "frontend/autograd.h"
#include "frontend/nn.h"
#include "frontend/optim.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "runtime/binary_io.h"

namespace kiln {
namespace serialize {
namespace {

constexpr io::FrameFormat kFormat{"KILN-ARCHIVE\n", kArchiveFormatVersion, "Kiln archive file",
                                  "entry count"};

enum Kind : uint8_t { kTensor = 1, kDouble = 2, kInt = 3, kBool = 4, kString = 5, kEmpty = 6 };

std::string joined(const std::vector<std::string>& path) {
  std::string s;
  for (size_t i = 0; i < path.size(); ++i) s += (i ? "/" : "") + path[i];
  return s;
}

}  // namespace

struct InputArchive::Node {
  std::vector<std::string> order;
  std::map<std::string, std::shared_ptr<Node>> children;
  Tensor tensor;
  std::optional<ArchiveValue> value;
  bool is_buffer = false;
  bool has_children = false;  // an archive (maybe empty), not a leaf
};

// ---- writing ----

void OutputArchive::add(std::vector<std::string> path, Entry e) {
  for (const Entry& old : entries_)
    KILN_CHECK(old.path != path, "OutputArchive: the key '", joined(path),
               "' was written twice (expected each key once)");
  e.path = std::move(path);
  entries_.push_back(std::move(e));
}

void OutputArchive::write(const std::string& key, const Tensor& tensor, bool is_buffer) {
  KILN_CHECK(tensor.defined(), "OutputArchive::write('", key, "'): the tensor is undefined");
  KILN_CHECK(!tensor.is_symbolic(), "OutputArchive::write('", key,
             "') inside a traced function (expected it outside, where tensors hold data)");
  NoGradGuard no_grad;
  // A copy (clone), so that later writes to the tensor do not change the archive.
  Tensor dense = tensor.detach().cpu().contiguous().clone();
  Entry e;
  e.value = dense;
  e.is_buffer = is_buffer;
  add({key}, std::move(e));
}

void OutputArchive::write(const std::string& key, const OutputArchive& nested) {
  if (nested.entries_.empty()) {
    Entry e;
    e.value = std::monostate{};
    add({key}, std::move(e));
    return;
  }
  for (const Entry& n : nested.entries_) {
    std::vector<std::string> path{key};
    path.insert(path.end(), n.path.begin(), n.path.end());
    add(std::move(path), n);
  }
}

void OutputArchive::write(const std::string& key, double v) {
  add({key}, Entry{{}, ArchiveValue(v)});
}
void OutputArchive::write(const std::string& key, int64_t v) {
  add({key}, Entry{{}, ArchiveValue(v)});
}
void OutputArchive::write(const std::string& key, bool v) {
  add({key}, Entry{{}, ArchiveValue(v)});
}
void OutputArchive::write(const std::string& key, const std::string& v) {
  add({key}, Entry{{}, ArchiveValue(v)});
}

std::string OutputArchive::bytes() const {
  io::ByteWriter w;
  io::begin_frame(w, kFormat, static_cast<uint32_t>(entries_.size()));
  for (const Entry& e : entries_) {
    w.u32(static_cast<uint32_t>(e.path.size()));
    for (const std::string& part : e.path) {
      w.u32(static_cast<uint32_t>(part.size()));
      w.bytes(part);
    }
    if (const Tensor* t = std::get_if<Tensor>(&e.value)) {
      w.u8(kTensor);
      w.u8(e.is_buffer ? 1 : 0);
      io::write_tensor_record(w, "", t->dtype(), t->sizes(), t->impl()->view().data);
    } else if (std::holds_alternative<std::monostate>(e.value)) {
      w.u8(kEmpty);
    } else {
      const ArchiveValue& v = std::get<ArchiveValue>(e.value);
      if (auto* d = std::get_if<double>(&v)) {
        w.u8(kDouble);
        uint64_t bits;
        std::memcpy(&bits, d, 8);
        w.u64(bits);
      } else if (auto* i = std::get_if<int64_t>(&v)) {
        w.u8(kInt);
        w.i64(*i);
      } else if (auto* b = std::get_if<bool>(&v)) {
        w.u8(kBool);
        w.u8(*b ? 1 : 0);
      } else {
        const std::string& s = std::get<std::string>(v);
        w.u8(kString);
        w.u32(static_cast<uint32_t>(s.size()));
        w.bytes(s);
      }
    }
  }
  io::end_frame(w, kFormat);
  return std::move(w.str());
}

void OutputArchive::save_to(const std::string& path) const {
  io::write_file_durable(path, bytes());
}

void OutputArchive::save_to(std::ostream& stream) const {
  const std::string b = bytes();
  stream.write(b.data(), static_cast<std::streamsize>(b.size()));
  KILN_CHECK(stream.good(), "OutputArchive::save_to: the stream failed after writing ", b.size(),
             " bytes");
}

// ---- reading ----

namespace {

std::string read_string(io::ByteReader& r, const char* what) {
  const uint64_t n = r.u(4, what);
  return std::string(r.bytes(n, what));
}

}  // namespace

void InputArchive::load_from(const std::string& path) {
  load_from_bytes(io::read_file(path), path);
}

void InputArchive::load_from(std::istream& stream) {
  std::string bytes((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
  load_from_bytes(std::move(bytes), "<stream>");
}

void InputArchive::load_from_bytes(std::string data, const std::string& name) {
  auto parse = [&](io::ByteReader& r, uint32_t count, Node* root) {
    for (uint32_t i = 0; i < count; ++i) {
      r.where = "entry " + std::to_string(i) + " of " + std::to_string(count);
      const size_t at = r.pos();
      const uint64_t parts = r.u(4, "the key's part count");
      if (parts == 0 || parts > 64)
        r.malformed("a key of " + std::to_string(parts) + " parts (expected 1 to 64)", at);
      std::vector<std::string> path;
      for (uint64_t p = 0; p < parts; ++p) path.push_back(read_string(r, "a key part"));
      const uint8_t kind = static_cast<uint8_t>(r.u(1, "the entry's kind"));
      Node leaf;
      switch (kind) {
        case kTensor: {
          leaf.is_buffer = r.u(1, "the buffer flag") != 0;
          io::TensorRecord rec = io::read_tensor_record(r);
          if (root) {
            Tensor t = empty(rec.shape, TensorOptions(rec.dtype));
            if (!rec.data.empty())
              std::memcpy(t.impl()->view().data, rec.data.data(), rec.data.size());
            leaf.tensor = t;
          }
          break;
        }
        case kDouble: {
          const uint64_t bits = r.u(8, "a double");
          double d;
          std::memcpy(&d, &bits, 8);
          leaf.value = d;
          break;
        }
        case kInt:
          leaf.value = static_cast<int64_t>(r.u(8, "an integer"));
          break;
        case kBool:
          leaf.value = r.u(1, "a bool") != 0;
          break;
        case kString:
          leaf.value = read_string(r, "a string");
          break;
        case kEmpty:
          leaf.has_children = true;
          break;
        default:
          r.malformed("entry kind " + std::to_string(kind) + " (expected 1 to 6)", at);
      }
      if (!root) continue;
      Node* n = root;
      for (size_t p = 0; p < path.size(); ++p) {
        if (n->tensor.defined() || n->value)
          r.malformed("the key '" + joined(path) + "' is inside a tensor or value", at);
        n->has_children = true;
        auto [it, fresh] = n->children.emplace(path[p], nullptr);
        if (fresh) {
          it->second = std::make_shared<Node>();
          n->order.push_back(path[p]);
        }
        n = it->second.get();
      }
      if (n->tensor.defined() || n->value || (n->has_children && !leaf.has_children) ||
          (leaf.has_children && !n->children.empty()))
        r.malformed("a second entry for the key '" + joined(path) + "'", at);
      const bool children = n->has_children;
      *n = std::move(leaf);
      n->has_children = n->has_children || children;
    }
  };
  io::Frame frame = io::open_frame(
      name, data, kFormat, [&](io::ByteReader& r, uint32_t count) { parse(r, count, nullptr); });
  auto root = std::make_shared<Node>();
  root->has_children = true;
  parse(frame.body, frame.count, root.get());
  if (frame.body.remaining() != 0)
    frame.body.malformed(std::to_string(frame.body.remaining()) + " bytes after the last entry",
                         frame.body.pos());
  name_ = name;
  root_ = std::move(root);
  prefix_.clear();
}

const InputArchive::Node& InputArchive::find(const std::string& key, const char* what) const {
  KILN_CHECK(root_, "InputArchive: read('", key, "') before load_from (the archive is empty)");
  auto it = root_->children.find(key);
  if (it == root_->children.end()) {
    std::vector<std::string> path = prefix_;
    path.push_back(key);
    throw Error(name_ + ": no " + what + " '" + joined(path) + "' in the archive");
  }
  return *it->second;
}

bool InputArchive::try_read(const std::string& key, Tensor& tensor, bool is_buffer) {
  if (!root_ || !root_->children.count(key)) return false;
  read(key, tensor, is_buffer);
  return true;
}

void InputArchive::read(const std::string& key, Tensor& tensor, bool) {
  const Node& n = find(key, "tensor");
  std::vector<std::string> path = prefix_;
  path.push_back(key);
  if (!n.tensor.defined()) throw Error(name_ + ": '" + joined(path) + "' is not a tensor");
  KILN_CHECK(!current_trace(), "InputArchive::read('", joined(path),
             "') inside a traced function (expected it outside, before tracing)");
  if (!tensor.defined()) {
    tensor = n.tensor.clone();
    return;
  }
  if (tensor.dtype() != n.tensor.dtype() || tensor.sizes() != n.tensor.sizes())
    throw Error(name_ + ": '" + joined(path) + "' is " + dtype_name(n.tensor.dtype()) +
                shape_str(n.tensor.sizes()) + ", the tensor it is read into " +
                dtype_name(tensor.dtype()) + shape_str(tensor.sizes()));
  NoGradGuard no_grad;
  tensor.copy_(tensor.device() == n.tensor.device() ? n.tensor : n.tensor.to(tensor.device()));
}

bool InputArchive::try_read(const std::string& key, InputArchive& nested) {
  if (!root_ || !root_->children.count(key) || !root_->children.at(key)->has_children) return false;
  read(key, nested);
  return true;
}

void InputArchive::read(const std::string& key, InputArchive& nested) {
  const Node& n = find(key, "archive");
  std::vector<std::string> path = prefix_;
  path.push_back(key);
  if (!n.has_children) throw Error(name_ + ": '" + joined(path) + "' is not an archive");
  nested.name_ = name_;
  nested.prefix_ = path;
  nested.root_ = root_->children.at(key);
}

namespace {
template <class T>
void read_value(const InputArchive::Node& n, const std::string& name, const std::string& key,
                T& out) {
  const T* v = n.value ? std::get_if<T>(&*n.value) : nullptr;
  if (!v) throw Error(name + ": '" + key + "' is not a value of the type asked for");
  out = *v;
}
}  // namespace

void InputArchive::read(const std::string& key, double& v) {
  read_value(find(key, "value"), name_, key, v);
}
void InputArchive::read(const std::string& key, int64_t& v) {
  read_value(find(key, "value"), name_, key, v);
}
void InputArchive::read(const std::string& key, bool& v) {
  read_value(find(key, "value"), name_, key, v);
}
void InputArchive::read(const std::string& key, std::string& v) {
  read_value(find(key, "value"), name_, key, v);
}

std::vector<std::string> InputArchive::keys() const {
  return root_ ? root_->order : std::vector<std::string>{};
}

}  // namespace serialize

// ---- modules and optimizers ----

void nn::Module::save(serialize::OutputArchive& archive) const {
  for (const auto& [name, t] : params_)
    if (t.defined()) archive.write(name, t);
  for (const auto& [name, t] : buffers_)
    if (t.defined()) archive.write(name, t, /*is_buffer=*/true);
  for (const auto& [name, child] : children_) {
    serialize::OutputArchive a;
    child->save(a);
    archive.write(name, a);
  }
}

void nn::Module::load(serialize::InputArchive& archive) {
  for (auto& [name, t] : params_)
    if (t.defined()) archive.read(name, t);
  for (auto& [name, t] : buffers_)
    if (t.defined()) archive.read(name, t, /*is_buffer=*/true);
  for (auto& [name, child] : children_) {
    serialize::InputArchive a;
    archive.read(name, a);
    child->load(a);
  }
}

void optim::Optimizer::save(serialize::OutputArchive& archive) const {
  archive.write("kind", std::string(name()));
  archive.write("lr", lr());
  // Every group's rate (the first is "lr" too, as one-group archives hold it).
  const std::vector<OptimizerParamGroup>& groups = param_groups();
  archive.write("group_count", static_cast<int64_t>(groups.size()));
  for (size_t g = 0; g < groups.size(); ++g)
    archive.write("lr_of_group_" + std::to_string(g), groups[g].options().get_lr());
  serialize::OutputArchive hyper;
  for (const Hyperparameter& h : all_hyperparameters()) hyper.write(h.name, h.value);
  archive.write("hyperparameters", hyper);
  const std::vector<Tensor> s = state();
  archive.write("state_count", static_cast<int64_t>(s.size()));
  for (size_t i = 0; i < s.size(); ++i) archive.write("state." + std::to_string(i), s[i]);
}

void optim::Optimizer::load(serialize::InputArchive& archive) {
  std::string kind;
  archive.read("kind", kind);
  KILN_CHECK(kind == name(), "Optimizer::load: the archive holds the state of a ", kind,
             " optimizer, this is a ", name());
  const std::vector<std::string> keys = archive.keys();
  const bool one_group = std::find(keys.begin(), keys.end(), "group_count") == keys.end();
  if (!one_group) {
    int64_t groups = 0;
    archive.read("group_count", groups);
    KILN_CHECK(groups == static_cast<int64_t>(param_groups().size()), "Optimizer::load: the archive holds ",
               groups, " parameter groups, this ", name(), " has ", param_groups().size());
  }
  int64_t count = 0;
  archive.read("state_count", count);
  std::vector<Tensor> s = state();
  KILN_CHECK(count == static_cast<int64_t>(s.size()), "Optimizer::load: the archive holds ", count,
             " state tensors, this ", name(), " has ", s.size(),
             " (expected an optimizer over the same parameters, with the same options)");
  // Every shape checked before any write.
  for (size_t i = 0; i < s.size(); ++i) {
    serialize::InputArchive check = archive;
    Tensor probe;
    check.read("state." + std::to_string(i), probe);
    KILN_CHECK(probe.sizes() == s[i].sizes() && probe.dtype() == s[i].dtype(),
               "Optimizer::load: state tensor ", i, " is ", dtype_name(probe.dtype()),
               shape_str(probe.sizes()), " in the archive, ", dtype_name(s[i].dtype()),
               shape_str(s[i].sizes()), " here");
  }
  for (size_t i = 0; i < s.size(); ++i) archive.read("state." + std::to_string(i), s[i]);
  if (one_group) {
    double lr = 0;
    archive.read("lr", lr);
    set_lr(lr);
    return;
  }
  for (size_t g = 0; g < param_groups().size(); ++g) {
    double lr = 0;
    archive.read("lr_of_group_" + std::to_string(g), lr);
    param_groups()[g].options().set_lr(lr);
  }
}

}  // namespace kiln
