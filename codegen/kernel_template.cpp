// Kernel templates (see kernel_template.h). A kernel's *sites* are its
// constants (in value order) and its loop trip counts (in statement order); two
// kernels of one skeleton have the same sites, and a template is a kernel in
// which some sites are parameters.
#include "codegen/kernel_template.h"

#include <bit>
#include <unordered_map>

#include "ir/error.h"

namespace kiln::kir {

namespace {

bool is_site(const ValueDef& d) {
  return d.op == ScalarOp::const_ || d.op == ScalarOp::param;
}

// A constant's bits: equal bits are the same constant (NaN included, -0 apart from 0).
int64_t const_bits(const ValueDef& d) {
  return is_floating(d.type) ? std::bit_cast<int64_t>(d.fimm) : d.iimm;
}

// The loop statements of a body, in statement order.
void collect_loops(const std::vector<Stmt>& body, std::vector<const Stmt*>& out) {
  for (const Stmt& s : body) {
    if (s.kind == StmtKind::loop) out.push_back(&s);
    if (s.kind == StmtKind::loop || s.kind == StmtKind::if_) collect_loops(s.body, out);
  }
}
void collect_loops(std::vector<Stmt>& body, std::vector<Stmt*>& out) {
  for (Stmt& s : body) {
    if (s.kind == StmtKind::loop) out.push_back(&s);
    if (s.kind == StmtKind::loop || s.kind == StmtKind::if_) collect_loops(s.body, out);
  }
}
std::vector<const Stmt*> loops_of(const Kernel& k) {
  std::vector<const Stmt*> out;
  collect_loops(k.body, out);
  return out;
}

void check_same_skeleton(const Kernel& a, const Kernel& b, size_t loops_a, size_t loops_b) {
  KILN_CHECK(a.values.size() == b.values.size() && a.buffers.size() == b.buffers.size() &&
                 loops_a == loops_b,
             "internal: kernel templates of kernels with different skeletons (", a.name, ", ",
             b.name, ")");
}

}  // namespace

std::string skeleton(const Kernel& k) {
  return print_kernel(k, {.names = false, .skeleton = true});
}

int64_t count_differences(const Kernel& a, const Kernel& b) {
  const std::vector<const Stmt*> la = loops_of(a), lb = loops_of(b);
  check_same_skeleton(a, b, la.size(), lb.size());
  int64_t n = 0;
  for (size_t i = 0; i < a.values.size(); ++i)
    n += is_site(a.values[i]) && (a.values[i].op != b.values[i].op ||
                                   const_bits(a.values[i]) != const_bits(b.values[i]));
  for (size_t i = 0; i < la.size(); ++i) n += la[i]->extent != lb[i]->extent;
  return n;
}

Kernel generalize(const Kernel& a, const Kernel& b, const Kernel* also) {
  Kernel t = a;
  std::vector<Stmt*> lt;
  collect_loops(t.body, lt);
  const std::vector<const Stmt*> lb = loops_of(b);
  const std::vector<const Stmt*> la = also ? loops_of(*also) : std::vector<const Stmt*>{};
  check_same_skeleton(a, b, lt.size(), lb.size());
  if (also) check_same_skeleton(a, *also, lt.size(), la.size());
  t.params.clear();
  for (size_t i = 0; i < t.values.size(); ++i) {
    ValueDef& d = t.values[i];
    if (d.op != ScalarOp::const_) continue;
    const bool same = b.values[i].op == ScalarOp::const_ && const_bits(d) == const_bits(b.values[i]);
    if (same && !(also && also->values[i].op == ScalarOp::param)) continue;
    d.op = ScalarOp::param;
    d.ref = static_cast<int32_t>(t.params.size());
    d.fimm = 0;
    d.iimm = 0;
    t.params.push_back(is_floating(d.type) ? DType::f64 : DType::i64);
  }
  for (size_t i = 0; i < lt.size(); ++i) {
    if (lt[i]->extent == lb[i]->extent && !(also && la[i]->extent_param >= 0)) continue;
    lt[i]->extent_param = static_cast<int32_t>(t.params.size());
    t.params.push_back(DType::i64);
  }
  for (size_t i = 0; i < t.buffers.size(); ++i)
    t.buffers[i].sized_at_run_time = t.buffers[i].shape != b.buffers[i].shape ||
                                     (also && also->buffers[i].sized_at_run_time);
  verify_kernel(t);
  return t;
}

std::optional<std::vector<int64_t>> bind(const Kernel& t, const Kernel& k) {
  const std::vector<const Stmt*> lt = loops_of(t), lk = loops_of(k);
  if (t.values.size() != k.values.size() || t.buffers.size() != k.buffers.size() ||
      lt.size() != lk.size())
    return std::nullopt;
  std::vector<int64_t> p(t.params.size(), 0);
  for (size_t i = 0; i < t.values.size(); ++i) {
    const ValueDef& d = t.values[i];
    const ValueDef& c = k.values[i];
    if (!is_site(d)) continue;
    if (c.op != ScalarOp::const_ || c.type != d.type) return std::nullopt;
    if (d.op == ScalarOp::param)
      p[size_t(d.ref)] = const_bits(c);
    else if (const_bits(d) != const_bits(c))
      return std::nullopt;
  }
  for (size_t i = 0; i < lt.size(); ++i) {
    if (lt[i]->extent_param >= 0)
      p[size_t(lt[i]->extent_param)] = lk[i]->extent;
    else if (lt[i]->extent != lk[i]->extent)
      return std::nullopt;
  }
  for (size_t i = 0; i < t.buffers.size(); ++i)
    if (!t.buffers[i].sized_at_run_time && t.buffers[i].shape != k.buffers[i].shape)
      return std::nullopt;
  return p;
}

namespace {

// The constants of the kernel's index arithmetic: the strides it multiplies
// indices by and the sizes it divides them by. Compiled in, they let LLVM turn a
// division into a multiply and a shift and see which loads are contiguous (and
// vectorise them); as run-time parameters, a hardware division per element and
// strided scalar loads cost more than the compile they save.
std::string index_constants(const Kernel& k) {
  std::string out;
  for (const ValueDef& d : k.values) {
    if (d.type != DType::i64 || (d.op != ScalarOp::mul && d.op != ScalarOp::idiv &&
                                 d.op != ScalarOp::imod))
      continue;
    for (ValueId a : {d.args[0], d.args[1]}) {
      const ValueDef& c = k.values[size_t(a)];
      if (c.op != ScalarOp::const_) continue;
      out += ' ';
      out += std::to_string(c.iimm);
    }
  }
  return out;
}

}  // namespace

std::vector<Family> families(const std::vector<const Kernel*>& kernels) {
  std::vector<std::string> skeletons;  // in order of first appearance, for a stable result
  std::unordered_map<std::string, std::vector<size_t>> by_skeleton;
  for (size_t i = 0; i < kernels.size(); ++i) {
    // Members share their index constants, which stay constants in the template.
    std::string s = skeleton(*kernels[i]);
    s += "\n;";
    s += index_constants(*kernels[i]);
    std::vector<size_t>& members = by_skeleton[s];
    if (members.empty()) skeletons.push_back(std::move(s));
    members.push_back(i);
  }
  std::vector<Family> out;
  for (const std::string& s : skeletons) {
    std::vector<size_t>& members = by_skeleton[s];
    if (members.size() < 2) continue;
    // Widened member by member: each template varies where the one before did
    // and where the new member differs from the first.
    const Kernel& first = *kernels[members[0]];
    Family f{first, std::move(members), {}};
    bool widened = false;
    for (size_t m = 1; m < f.members.size(); ++m) {
      const Kernel& k = *kernels[f.members[m]];
      if (bind(f.templ, k)) continue;
      f.templ = generalize(k, first, widened ? &f.templ : nullptr);
      widened = true;
    }
    for (size_t m : f.members) {
      std::optional<std::vector<int64_t>> p = bind(f.templ, *kernels[m]);
      KILN_CHECK(p.has_value(), "internal: a kernel is not an instance of its family's template");
      f.params.push_back(std::move(*p));
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace kiln::kir

namespace kiln {

namespace {

// How many sites and buffer shapes of two kernels of one skeleton differ (0: the same sizes).
int64_t distance(const kir::Kernel& a, const kir::Kernel& b) {
  int64_t d = kir::count_differences(a, b);
  for (size_t i = 0; i < a.buffers.size(); ++i) d += a.buffers[i].shape != b.buffers[i].shape;
  return d;
}

size_t stmt_bytes(const std::vector<kir::Stmt>& body) {
  size_t n = body.capacity() * sizeof(kir::Stmt);
  for (const kir::Stmt& s : body) n += stmt_bytes(s.body);
  return n;
}

// The memory a kernel's IR holds, near enough to bound a cache by.
size_t kernel_bytes(const kir::Kernel& k) {
  size_t n = sizeof(kir::Kernel) + k.name.size() + k.values.capacity() * sizeof(kir::ValueDef) +
             k.accs.capacity() * sizeof(kir::Accumulator) + k.params.capacity() * sizeof(DType) +
             stmt_bytes(k.body);
  for (const kir::Buffer& b : k.buffers)
    n += sizeof(b) + b.name.size() + b.shape.size() * sizeof(int64_t);
  for (const kir::Table& t : k.tables)
    n += sizeof(t) + t.fdata.size() * sizeof(double) + t.idata.size() * sizeof(int64_t);
  return n;
}

// The template of `ts` with the fewest parameters that k is an instance of (the
// newest of those), with its parameter values in *params; null when none is.
const kir::Kernel* narrowest(const std::vector<kir::Kernel>& ts, const kir::Kernel& k,
                             std::vector<int64_t>* params) {
  const kir::Kernel* best = nullptr;
  for (auto t = ts.rbegin(); t != ts.rend(); ++t) {
    if (best && t->params.size() >= best->params.size()) continue;
    if (auto p = kir::bind(*t, k)) {
      best = &*t;
      if (params) *params = std::move(*p);
    }
  }
  return best;
}

}  // namespace

void KernelTemplateCache::remember(const std::string& skeleton, const kir::Kernel& k) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(skeleton);
  add_seen(f, k);
  shrink(&f);
}

std::optional<kir::Kernel> KernelTemplateCache::find_or_make(const std::string& skeleton,
                                                             const kir::Kernel& k,
                                                             std::vector<int64_t>* params) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(skeleton);
  if (const kir::Kernel* t = narrowest(f.templates, k, params)) return *t;
  const kir::Kernel* nearest = nullptr;
  int64_t fewest = 0;
  for (const kir::Kernel& s : f.seen) {
    const int64_t d = distance(s, k);
    if (d == 0) continue;  // the same sizes
    if (!nearest || d <= fewest) {
      nearest = &s;
      fewest = d;
    }
  }
  if (!nearest) return std::nullopt;
  // Where the template the nearest kernel runs varies, this one does too: two
  // groups of one skeleton (transposes of two widths) changing with the same
  // batch size each need the batch size as a parameter, whichever pair of
  // kernels was nearest.
  kir::Kernel t = kir::generalize(k, *nearest, narrowest(f.templates, *nearest, nullptr));
  auto p = kir::bind(t, k);
  KILN_CHECK(p.has_value(), "internal: a kernel is not an instance of the template made from it");
  *params = std::move(*p);
  add_template(f, t);
  add_seen(f, k);
  shrink(&f);
  return t;
}

size_t KernelTemplateCache::families() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

size_t KernelTemplateCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void KernelTemplateCache::add_seen(Family& f, const kir::Kernel& k) {
  for (const kir::Kernel& s : f.seen)
    if (distance(s, k) == 0) return;
  if (f.seen.size() == kSeen) {
    const size_t b = kernel_bytes(f.seen.front());
    f.bytes -= b;
    bytes_ -= b;
    f.seen.erase(f.seen.begin());
  }
  f.seen.push_back(k);
  const size_t b = kernel_bytes(f.seen.back());
  f.bytes += b;
  bytes_ += b;
}

void KernelTemplateCache::add_template(Family& f, kir::Kernel t) {
  if (f.templates.size() == kTemplates) {
    const size_t b = kernel_bytes(f.templates.front());
    f.bytes -= b;
    bytes_ -= b;
    f.templates.erase(f.templates.begin());
  }
  f.templates.push_back(std::move(t));
  const size_t b = kernel_bytes(f.templates.back());
  f.bytes += b;
  bytes_ += b;
}

// The skeleton's family, now the most recently used.
KernelTemplateCache::Family& KernelTemplateCache::family(const std::string& skeleton) {
  if (auto it = map_.find(skeleton); it != map_.end()) {
    used_.splice(used_.begin(), used_, it->second.used);
    return it->second;
  }
  auto [it, added] = map_.emplace(skeleton, Family{});
  used_.push_front(&it->first);
  it->second.used = used_.begin();
  it->second.bytes = sizeof(Family) + skeleton.size();
  bytes_ += it->second.bytes;
  return it->second;
}

// Drops the least recently used families (never `keep`, the one just used) until
// the cache is within its bound.
void KernelTemplateCache::shrink(const Family* keep) {
  while (bytes_ > max_bytes_ && !used_.empty()) {
    auto it = map_.find(*used_.back());
    if (&it->second == keep)
      break;  // the newest family alone is over the bound: kept until the next
    bytes_ -= it->second.bytes;
    used_.pop_back();
    map_.erase(it);
  }
}

}  // namespace kiln
