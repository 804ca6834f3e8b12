// safetensors files: the checked reader, the writer, and loading a module's
// weights by name (see safetensors.h).
#include "frontend/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "frontend/autograd.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "runtime/binary_io.h"

namespace kiln {
namespace {

using json = nlohmann::json;

// safetensors' own limit on the header.
constexpr uint64_t kMaxHeader = 100'000'000;

struct Kind {
  const char* name;
  DType dtype;       // what Kiln holds it as
  size_t file_size;  // bytes per element in the file
};
constexpr Kind kKinds[] = {{"F64", DType::f64, 8},  {"F32", DType::f32, 4}, {"F16", DType::f32, 2},
                           {"BF16", DType::f32, 2}, {"I64", DType::i64, 8}, {"I32", DType::i32, 4},
                           {"BOOL", DType::b8, 1},  {"U8", DType::u8, 1},   {"I8", DType::i8, 1},
                           {"I16", DType::i16, 2}};

const char* file_dtype(DType t) {
  switch (t) {
    case DType::f64:
      return "F64";
    case DType::f32:
      return "F32";
    case DType::i64:
      return "I64";
    case DType::i32:
      return "I32";
    case DType::b8:
      return "BOOL";
    case DType::u8:
      return "U8";
    case DType::i8:
      return "I8";
    case DType::i16:
      return "I16";
  }
  return "?";
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bfloat_to_float(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw Error(name + ": " + what + " (expected a safetensors file)");
}

// The header as JSON, and where the data starts.
json header_of(const std::string& bytes, const std::string& name, size_t* data_start) {
  if (bytes.size() < 8)
    fail(name, "the file is " + std::to_string(bytes.size()) +
                   " bytes, too short for the header's length");
  const uint64_t n = io::load_le(bytes.data(), 8);
  if (n > kMaxHeader || n > bytes.size() - 8)
    fail(name, "the header's length is " + std::to_string(n) + " bytes, but the file has " +
                   std::to_string(bytes.size() - 8) + " after it");
  json h;
  try {
    h = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const json::exception& e) {
    fail(name, std::string("the header is not valid JSON: ") + e.what());
  }
  if (!h.is_object()) fail(name, "the header is JSON but not an object");
  *data_start = 8 + n;
  return h;
}

int64_t nonnegative(const json& v, const std::string& name, const std::string& what) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    fail(name, what + " is " + v.dump() + ", not an integer >= 0");
  return v.get<int64_t>();
}

}  // namespace

std::map<std::string, Tensor> parse_safetensors(const std::string& bytes, const std::string& name) {
  size_t start = 0;
  const json h = header_of(bytes, name, &start);
  const uint64_t data_size = bytes.size() - start;
  struct Span {
    uint64_t begin, end;
    std::string tensor;
  };
  std::vector<Span> spans;
  std::map<std::string, Tensor> out;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& key = it.key();
    if (key == "__metadata__") continue;
    const std::string who = "tensor " + io::quote_name(key);
    const json& e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets"))
      fail(name,
           who + " is " + e.dump() + " (expected an object with dtype, shape and data_offsets)");
    if (!e["dtype"].is_string())
      fail(name, who + ": dtype " + e["dtype"].dump() + " is not a string");
    const std::string dt = e["dtype"].get<std::string>();
    const Kind* kind = nullptr;
    for (const Kind& k : kKinds)
      if (dt == k.name) kind = &k;
    if (!kind)
      fail(name, who + " has dtype " + dt +
                     " (Kiln reads F64, F32, F16, BF16, I64, I32, I16, I8, U8 and BOOL)");
    if (!e["shape"].is_array()) fail(name, who + ": shape " + e["shape"].dump() + " is not a list");
    Shape shape;
    for (const json& d : e["shape"]) shape.push_back(nonnegative(d, name, who + ": a dim"));
    const json& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2)
      fail(name, who + ": data_offsets " + off.dump() + " is not [begin, end]");
    const uint64_t begin = static_cast<uint64_t>(nonnegative(off[0], name, who + ": begin"));
    const uint64_t end = static_cast<uint64_t>(nonnegative(off[1], name, who + ": end"));
    if (begin > end || end > data_size)
      fail(name, who + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] outside the " + std::to_string(data_size) + " bytes of data");
    int64_t count = 0;
    try {
      count = numel(shape);
      (void)byte_size(shape, kind->file_size);
    } catch (const Error&) {
      fail(name, who + ": shape " + shape_str(shape) + " is too large");
    }
    if (end - begin != static_cast<uint64_t>(count) * kind->file_size)
      fail(name, who + " holds " + std::to_string(end - begin) + " bytes, but " + dt +
                     shape_str(shape) + " is " +
                     std::to_string(static_cast<uint64_t>(count) * kind->file_size));
    spans.push_back({begin, end, key});
    Tensor t = empty(shape, TensorOptions(kind->dtype));
    const char* src = bytes.data() + start + begin;
    if (dt == "F16" || dt == "BF16") {
      float* dst = t.data_ptr<float>();
      for (int64_t i = 0; i < count; ++i) {
        const uint16_t v = static_cast<uint16_t>(io::load_le(src + 2 * i, 2));
        dst[i] = dt == "F16" ? half_to_float(v) : bfloat_to_float(v);
      }
    } else if (count > 0) {
      std::memcpy(t.impl()->view().data, src, end - begin);
      if (kind->dtype == DType::b8)
        for (int64_t i = 0; i < count; ++i)
          if (static_cast<unsigned char>(src[i]) > 1)
            fail(name, who + ": element " + std::to_string(i) + " is " +
                           std::to_string(int(src[i])) + ", not a bool (0 or 1)");
    }
    out.emplace(key, t);
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end && spans[i].begin != spans[i].end)
      fail(name, "tensors " + io::quote_name(spans[i - 1].tensor) + " and " +
                     io::quote_name(spans[i].tensor) + " overlap in the data");
  return out;
}

std::map<std::string, Tensor> read_safetensors(const std::string& path) {
  return parse_safetensors(io::read_file(path), path);
}

std::map<std::string, std::string> safetensors_metadata(const std::string& path) {
  const std::string bytes = io::read_file(path);
  size_t start = 0;
  const json h = header_of(bytes, path, &start);
  std::map<std::string, std::string> out;
  if (!h.contains("__metadata__")) return out;
  const json& m = h["__metadata__"];
  if (!m.is_object()) fail(path, "__metadata__ is not an object");
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!it.value().is_string()) fail(path, "__metadata__ '" + it.key() + "' is not a string");
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  KILN_CHECK(!current_trace(), "write_safetensors(", path,
             ") inside a traced function (expected it outside)");
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  std::string data;
  std::set<std::string> names;
  NoGradGuard no_grad;
  for (const auto& [name, t] : tensors) {
    KILN_CHECK(name != "__metadata__" && names.insert(name).second, "write_safetensors(", path,
               "): the name ", io::quote_name(name), " is reserved or given twice");
    KILN_CHECK(t.defined(), "write_safetensors(", path, "): ", io::quote_name(name),
               " is undefined");
    Tensor dense = t.detach().cpu().contiguous();
    const size_t begin = data.size();
    data.append(static_cast<const char*>(dense.impl()->view().data), dense.nbytes());
    h[name] = {{"dtype", file_dtype(dense.dtype())},
               {"shape", dense.sizes()},
               {"data_offsets", {begin, data.size()}}};
  }
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  io::ByteWriter w;
  w.u64(text.size());
  w.bytes(text);
  w.bytes(data);
  io::write_file_durable(path, w.str());
}

std::vector<std::string> load_safetensors(nn::Module& module, const std::string& path,
                                          const SafetensorsLoadOptions& options) {
  KILN_CHECK(!current_trace(), "load_safetensors(", path,
             ") inside a traced function (expected it outside)");
  const std::map<std::string, Tensor> file = read_safetensors(path);
  std::vector<std::pair<std::string, Tensor>> state;
  for (auto& [n, t] : module.named_parameters())
    if (t.defined()) state.emplace_back(n, t);
  for (auto& [n, t] : module.named_buffers())
    if (t.defined()) state.emplace_back(n, t);
  // BatchNorm's batch counters: loaded when in both, never required (files
  // written before Kiln's BatchNorm kept one, or from a module without it).
  auto counter = [](const std::string& n) {
    const std::string suffix = "num_batches_tracked";
    return n.size() >= suffix.size() &&
           n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  std::vector<std::string> problems, loaded;
  std::set<std::string> in_module;
  for (const auto& [n, t] : state) {
    in_module.insert(n);
    auto it = file.find(n);
    if (it == file.end()) {
      if (options.strict && !counter(n))
        problems.push_back(io::quote_name(n) + " is missing from the file");
      continue;
    }
    const Tensor& f = it->second;
    if (f.sizes() != t.sizes())
      problems.push_back(n + ": the file has shape " + shape_str(f.sizes()) + ", the module " +
                         shape_str(t.sizes()));
    else if (f.dtype() != t.dtype() && !(is_floating(f.dtype()) && is_floating(t.dtype())))
      problems.push_back(n + ": the file has dtype " + dtype_name(f.dtype()) + ", the module " +
                         dtype_name(t.dtype()));
  }
  if (options.strict)
    for (const auto& [n, f] : file)
      if (!in_module.count(n) && !counter(n))
        problems.push_back(io::quote_name(n) + " is in the file but not in the module");
  if (!problems.empty()) {
    std::string what;
    for (size_t i = 0; i < problems.size() && i < 8; ++i) what += (i ? "; " : "") + problems[i];
    if (problems.size() > 8) what += "; and " + std::to_string(problems.size() - 8) + " more";
    throw Error(path + ": the file does not fit the module (" + what + "); nothing was loaded");
  }
  NoGradGuard no_grad;
  for (auto& [n, t] : state) {
    auto it = file.find(n);
    if (it == file.end()) continue;
    Tensor v = it->second.to(t.dtype());
    t.copy_(t.device() == v.device() ? v : v.to(t.device()));
    loaded.push_back(n);
  }
  return loaded;
}

void save_safetensors(const nn::Module& module, const std::string& path) {
  std::vector<std::pair<std::string, Tensor>> state;
  for (auto& [n, t] : module.named_parameters())
    if (t.defined()) state.emplace_back(n, t);
  for (auto& [n, t] : module.named_buffers())
    if (t.defined()) state.emplace_back(n, t);
  write_safetensors(path, state);
}

}  // namespace kiln
