// Kernel IR: op names, the printer, the verifier and the builder.
#include "codegen/kernel_ir.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "ir/attrs.h"
#include "ir/error.h"

namespace kiln::kir {

namespace {

constexpr const char* kOpNames[] = {
#define KILN_X(e, s) s,
    KILN_KIR_OPS(KILN_X)
#undef KILN_X
};

int arity(ScalarOp op) {
  switch (op) {
    case ScalarOp::const_:
    case ScalarOp::index:
    case ScalarOp::acc: return 0;
    case ScalarOp::load:
    case ScalarOp::table:
    case ScalarOp::cast:
    case ScalarOp::neg:
    case ScalarOp::abs:
    case ScalarOp::sign:
    case ScalarOp::relu:
    case ScalarOp::exp:
    case ScalarOp::log:
    case ScalarOp::sqrt:
    case ScalarOp::rsqrt:
    case ScalarOp::sin:
    case ScalarOp::cos:
    case ScalarOp::tanh:
    case ScalarOp::sigmoid:
    case ScalarOp::gelu:
    case ScalarOp::not_: return 1;
    case ScalarOp::select: return 3;
    default: return 2;
  }
}

bool is_float_only(ScalarOp op) {
  switch (op) {
    case ScalarOp::exp:
    case ScalarOp::log:
    case ScalarOp::sqrt:
    case ScalarOp::rsqrt:
    case ScalarOp::sin:
    case ScalarOp::cos:
    case ScalarOp::tanh:
    case ScalarOp::sigmoid:
    case ScalarOp::gelu: return true;
    default: return false;
  }
}

std::string const_str(const ValueDef& d) {
  if (is_floating(d.type)) return float_str(d.fimm);
  if (d.type == DType::b8) return d.iimm ? "true" : "false";
  return std::to_string(d.iimm);
}

// ---- Printer ----

class Printer {
 public:
  Printer(const Kernel& k, const PrintKernelOptions& o) : k_(k), o_(o) {}

  std::string run() {
    if (o_.names) os_ << "kernel " << k_.name << "\n";
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const Buffer& b = k_.buffers[i];
      os_ << "  buf" << i << " = " << (b.output ? "out " : "in ") << dtype_name(b.dtype)
          << shape_str(b.shape);
      if (b.alias >= 0) os_ << " aliases buf" << b.alias;
      if (o_.names && b.value.valid()) os_ << "  ; %" << b.value.node;
      if (o_.names && b.value.valid() && b.value.index) os_ << "#" << b.value.index;
      os_ << "\n";
    }
    for (size_t i = 0; i < k_.tables.size(); ++i) {
      const Table& t = k_.tables[i];
      os_ << "  table" << i << " = " << dtype_name(t.dtype) << "[" << t.size() << "] {";
      for (int64_t j = 0; j < t.size(); ++j) {
        if (j) os_ << ", ";
        if (t.fdata.empty())
          os_ << t.idata[j];
        else
          os_ << float_str(t.fdata[j]);
      }
      os_ << "}\n";
    }
    for (size_t i = 0; i < k_.accs.size(); ++i)
      os_ << "  acc" << i << " = " << reduce_kind_name(k_.accs[i].kind) << " "
          << dtype_name(k_.accs[i].type) << "\n";
    os_ << "parallel i0 in [0, " << k_.range << "):\n";
    block(k_.body, 1);
    return os_.str();
  }

 private:
  void indent(int d) {
    for (int i = 0; i < d; ++i) os_ << "  ";
  }
  void block(const std::vector<Stmt>& b, int d) {
    for (const Stmt& s : b) stmt(s, d);
  }
  void stmt(const Stmt& s, int d) {
    indent(d);
    switch (s.kind) {
      case StmtKind::let: {
        const ValueDef& v = k_.values.at(s.value);
        os_ << "%" << s.value << " = " << scalar_op_name(v.op);
        switch (v.op) {
          case ScalarOp::const_: os_ << " " << const_str(v); break;
          case ScalarOp::index: os_ << " i" << v.ref; break;
          case ScalarOp::load: os_ << " buf" << v.ref << "[%" << v.args[0] << "]"; break;
          case ScalarOp::table: os_ << " table" << v.ref << "[%" << v.args[0] << "]"; break;
          case ScalarOp::acc: os_ << " acc" << v.ref; break;
          default:
            for (int i = 0; i < arity(v.op); ++i) os_ << (i ? ", %" : " %") << v.args[i];
        }
        os_ << " : " << dtype_name(v.type) << "\n";
        break;
      }
      case StmtKind::store:
        os_ << "store buf" << s.ref << "[%" << s.index << "] = %" << s.value << "\n";
        break;
      case StmtKind::loop:
        os_ << "for i" << s.ref << " in [0, " << s.extent << "):\n";
        block(s.body, d + 1);
        break;
      case StmtKind::if_:
        os_ << "if %" << s.value << ":\n";
        block(s.body, d + 1);
        break;
      case StmtKind::acc_init: os_ << "acc" << s.ref << " = init\n"; break;
      case StmtKind::acc_update:
        os_ << "acc" << s.ref << " <- %" << s.value;
        if (s.index >= 0) os_ << " (at %" << s.index << ")";
        os_ << "\n";
        break;
    }
  }

  const Kernel& k_;
  const PrintKernelOptions& o_;
  std::ostringstream os_;
};

// ---- Verifier ----

class Verifier {
 public:
  explicit Verifier(const Kernel& k) : k_(k), defined_(k.values.size(), 0) {}

  void run() {
    check(k_.range >= 0, "negative range ", k_.range);
    for (const Buffer& b : k_.buffers) {
      if (b.alias >= 0) {
        check(b.output && b.alias < int32_t(k_.buffers.size()) && !k_.buffers[b.alias].output,
              b.name, ": alias must name an input buffer");
        check(k_.buffers[b.alias].dtype == b.dtype && k_.buffers[b.alias].numel() == b.numel(),
              b.name, ": aliased buffers differ in dtype or size");
      }
    }
    std::vector<char> loops_open(size_t(std::max(k_.num_loops, 1)), 0);
    loops_open[0] = 1;
    open_ = &loops_open;
    block(k_.body);
  }

 private:
  template <class... A>
  void check(bool ok, const A&... a) {
    if (!ok) detail::fail("kernel IR (", k_.name, "): ", a...);
  }
  void use(ValueId v) {
    check(v >= 0 && v < ValueId(k_.values.size()), "reference to undefined value %", v);
    check(defined_[v] == 1, "value %", v, " used outside the block that defines it");
  }
  DType ty(ValueId v) { return k_.values[v].type; }

  void let(ValueId id) {
    check(id >= 0 && id < ValueId(k_.values.size()), "let of unknown value %", id);
    check(defined_[id] == 0, "value %", id, " defined twice");
    const ValueDef& d = k_.values[id];
    const int n = arity(d.op);
    for (int i = 0; i < n; ++i) use(d.args[i]);
    std::ostringstream w;
    w << "%" << id << " (" << scalar_op_name(d.op) << ")";
    const std::string what = w.str();
    switch (d.op) {
      case ScalarOp::const_: break;
      case ScalarOp::index:
        check(d.type == DType::i64 && d.ref >= 0 && d.ref < k_.num_loops && (*open_)[d.ref], what,
              ": index of a loop that is not open");
        break;
      case ScalarOp::load:
        check(d.ref >= 0 && d.ref < int32_t(k_.buffers.size()), what, ": no buffer ", d.ref);
        check(!k_.buffers[d.ref].output, what, ": load from an output buffer");
        check(d.type == k_.buffers[d.ref].dtype && ty(d.args[0]) == DType::i64, what,
              ": type mismatch");
        break;
      case ScalarOp::table:
        check(d.ref >= 0 && d.ref < int32_t(k_.tables.size()), what, ": no table ", d.ref);
        check(d.type == k_.tables[d.ref].dtype && ty(d.args[0]) == DType::i64, what,
              ": type mismatch");
        break;
      case ScalarOp::acc: {
        check(d.ref >= 0 && d.ref < int32_t(k_.accs.size()), what, ": no accumulator ", d.ref);
        const Accumulator& a = k_.accs[d.ref];
        const bool arg = a.kind == ReduceKind::argmax || a.kind == ReduceKind::argmin;
        check(d.type == (arg ? DType::i64 : a.type), what, ": type mismatch");
        break;
      }
      case ScalarOp::cast: break;
      case ScalarOp::select:
        check(ty(d.args[0]) == DType::b8 && ty(d.args[1]) == d.type && ty(d.args[2]) == d.type,
              what, ": operand types");
        break;
      case ScalarOp::not_:
        check(d.type == DType::b8 && ty(d.args[0]) == DType::b8, what, ": expects bool");
        break;
      case ScalarOp::and_:
      case ScalarOp::or_:
        check(d.type == DType::b8 && ty(d.args[0]) == DType::b8 && ty(d.args[1]) == DType::b8,
              what, ": expects bool");
        break;
      case ScalarOp::idiv:
      case ScalarOp::imod:
        check(d.type == DType::i64 && ty(d.args[0]) == DType::i64 && ty(d.args[1]) == DType::i64,
              what, ": expects i64");
        break;
      default:
        if (is_comparison(d.op)) {
          check(d.type == DType::b8 && ty(d.args[0]) == ty(d.args[1]), what, ": operand types");
        } else {
          for (int i = 0; i < n; ++i) check(ty(d.args[i]) == d.type, what, ": operand types");
          check(!is_float_only(d.op) || is_floating(d.type), what, ": needs a floating type");
        }
    }
    defined_[id] = 1;
  }

  void block(const std::vector<Stmt>& b) {
    std::vector<ValueId> mine;
    for (const Stmt& s : b) {
      switch (s.kind) {
        case StmtKind::let:
          let(s.value);
          mine.push_back(s.value);
          break;
        case StmtKind::store: {
          check(s.ref >= 0 && s.ref < int32_t(k_.buffers.size()) && k_.buffers[s.ref].output,
                "store to buffer ", s.ref, ", which is not an output");
          use(s.index);
          use(s.value);
          check(ty(s.index) == DType::i64 && ty(s.value) == k_.buffers[s.ref].dtype,
                "store to buf", s.ref, ": type mismatch");
          break;
        }
        case StmtKind::loop:
          check(s.ref > 0 && s.ref < k_.num_loops && !(*open_)[s.ref], "bad loop variable i",
                s.ref);
          check(s.extent >= 0, "negative loop extent");
          (*open_)[s.ref] = 1;
          block(s.body);
          (*open_)[s.ref] = 0;
          break;
        case StmtKind::if_:
          use(s.value);
          check(ty(s.value) == DType::b8, "if: condition must be bool");
          block(s.body);
          break;
        case StmtKind::acc_init:
          check(s.ref >= 0 && s.ref < int32_t(k_.accs.size()), "no accumulator ", s.ref);
          break;
        case StmtKind::acc_update: {
          check(s.ref >= 0 && s.ref < int32_t(k_.accs.size()), "no accumulator ", s.ref);
          use(s.value);
          const Accumulator& a = k_.accs[s.ref];
          check(ty(s.value) == a.type, "acc", s.ref, " update: type mismatch");
          const bool arg = a.kind == ReduceKind::argmax || a.kind == ReduceKind::argmin;
          check(arg == (s.index >= 0), "acc", s.ref, ": argmax/argmin updates need a position");
          if (arg) use(s.index);
          break;
        }
      }
    }
    for (ValueId v : mine) defined_[v] = 2;  // out of scope
  }

  const Kernel& k_;
  std::vector<char> defined_;  // 0 not yet, 1 visible, 2 out of scope
  std::vector<char>* open_ = nullptr;
};

std::string cse_key(const ValueDef& d) {
  std::string key(sizeof(ValueDef), '\0');
  // Field by field so padding never enters the key.
  char* p = key.data();
  auto put = [&](const auto& x) {
    std::memcpy(p, &x, sizeof(x));
    p += sizeof(x);
  };
  put(d.op);
  put(d.type);
  put(d.args);
  put(d.fimm);
  put(d.iimm);
  put(d.ref);
  key.resize(size_t(p - key.data()));
  return key;
}

}  // namespace

const char* scalar_op_name(ScalarOp op) {
  return kOpNames[static_cast<int>(op)];
}

bool is_comparison(ScalarOp op) {
  switch (op) {
    case ScalarOp::eq:
    case ScalarOp::ne:
    case ScalarOp::lt:
    case ScalarOp::le:
    case ScalarOp::gt:
    case ScalarOp::ge: return true;
    default: return false;
  }
}

const char* reduce_kind_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::sum: return "sum";
    case ReduceKind::max: return "max";
    case ReduceKind::min: return "min";
    case ReduceKind::argmax: return "argmax";
    case ReduceKind::argmin: return "argmin";
  }
  return "?";
}

std::string print_kernel(const Kernel& k, const PrintKernelOptions& opts) {
  return Printer(k, opts).run();
}

void verify_kernel(const Kernel& k) {
  Verifier(k).run();
}

// ---- Builder ----

KernelBuilder::KernelBuilder(std::string name) {
  k_.name = std::move(name);
  blocks_.push_back(&k_.body);
  scopes_.emplace_back();
}

Kernel KernelBuilder::take() {
  KILN_CHECK(blocks_.size() == 1, "kernel builder: ", blocks_.size() - 1, " block(s) left open");
  Kernel out = std::move(k_);
  k_ = Kernel{};
  blocks_ = {&k_.body};
  scopes_.assign(1, Scope{});
  return out;
}

int32_t KernelBuilder::add_buffer(Buffer b) {
  b.name = "buf" + std::to_string(k_.buffers.size());
  k_.buffers.push_back(std::move(b));
  return int32_t(k_.buffers.size() - 1);
}

int32_t KernelBuilder::add_table(Table t) {
  k_.tables.push_back(std::move(t));
  return int32_t(k_.tables.size() - 1);
}

int32_t KernelBuilder::add_accumulator(ReduceKind kind, DType type) {
  k_.accs.push_back({kind, type});
  return int32_t(k_.accs.size() - 1);
}

double KernelBuilder::const_value(ValueId v) const {
  const ValueDef& d = def(v);
  return is_floating(d.type) ? d.fimm : double(d.iimm);
}

ValueId KernelBuilder::add_value(const ValueDef& d) {
  const std::string key = cse_key(d);
  for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
    auto it = s->cse.find(key);
    if (it != s->cse.end()) return it->second;
  }
  k_.values.push_back(d);
  const ValueId id = ValueId(k_.values.size() - 1);
  scopes_.back().cse.emplace(key, id);
  Stmt s;
  s.kind = StmtKind::let;
  s.value = id;
  push_stmt(std::move(s));
  return id;
}

ValueId KernelBuilder::constant(DType t, double v) {
  ValueDef d;
  d.op = ScalarOp::const_;
  d.type = t;
  if (is_floating(t)) {
    d.fimm = t == DType::f32 ? double(float(v)) : v;
  } else if (t == DType::b8) {
    d.iimm = v != 0;
  } else if (t == DType::i32) {
    d.iimm = int64_t(int32_t(v));
  } else {
    d.iimm = int64_t(v);
  }
  return add_value(d);
}

ValueId KernelBuilder::iconst(int64_t v, DType t) {
  KILN_CHECK(!is_floating(t), "kernel builder: iconst of a floating type");
  ValueDef d;
  d.op = ScalarOp::const_;
  d.type = t;
  d.iimm = t == DType::b8 ? (v != 0) : t == DType::i32 ? int64_t(int32_t(v)) : v;
  return add_value(d);
}

ValueId KernelBuilder::index(int32_t loop) {
  ValueDef d;
  d.op = ScalarOp::index;
  d.type = DType::i64;
  d.ref = loop;
  return add_value(d);
}

ValueId KernelBuilder::load(int32_t buffer, ValueId idx) {
  ValueDef d;
  d.op = ScalarOp::load;
  d.type = k_.buffers.at(buffer).dtype;
  d.args[0] = idx;
  d.ref = buffer;
  return add_value(d);
}

ValueId KernelBuilder::load_table(int32_t table, ValueId idx) {
  ValueDef d;
  d.op = ScalarOp::table;
  d.type = k_.tables.at(table).dtype;
  d.args[0] = idx;
  d.ref = table;
  return add_value(d);
}

ValueId KernelBuilder::acc_value(int32_t acc) {
  const Accumulator& a = k_.accs.at(acc);
  ValueDef d;
  d.op = ScalarOp::acc;
  d.type = (a.kind == ReduceKind::argmax || a.kind == ReduceKind::argmin) ? DType::i64 : a.type;
  d.ref = acc;
  return add_value(d);
}

ValueId KernelBuilder::cast(ValueId x, DType to) {
  if (type(x) == to) return x;
  if (is_const(x)) {
    const ValueDef& c = def(x);
    if (to == DType::b8) return iconst(is_floating(c.type) ? c.fimm != 0 : c.iimm != 0, to);
    if (is_floating(to)) return constant(to, const_value(x));
    if (!is_floating(c.type)) return iconst(c.iimm, to);
  }
  ValueDef d;
  d.op = ScalarOp::cast;
  d.type = to;
  d.args[0] = x;
  return add_value(d);
}

ValueId KernelBuilder::unary(ScalarOp op, ValueId x) {
  ValueDef d;
  d.op = op;
  d.type = type(x);
  d.args[0] = x;
  if (op == ScalarOp::not_ && is_const(x)) return iconst(def(x).iimm == 0, DType::b8);
  return add_value(d);
}

ValueId KernelBuilder::fold_binary(ScalarOp op, ValueId a, ValueId b) {
  const DType t = type(a);
  const bool integer = t == DType::i64 || t == DType::i32;
  if (integer && is_const(a) && is_const(b)) {
    const int64_t x = def(a).iimm, y = def(b).iimm;
    switch (op) {
      case ScalarOp::add: return iconst(int64_t(uint64_t(x) + uint64_t(y)), t);
      case ScalarOp::sub: return iconst(int64_t(uint64_t(x) - uint64_t(y)), t);
      case ScalarOp::mul: return iconst(int64_t(uint64_t(x) * uint64_t(y)), t);
      case ScalarOp::idiv:
        if (y > 0 && x >= 0) return iconst(x / y, t);
        break;
      case ScalarOp::imod:
        if (y > 0 && x >= 0) return iconst(x % y, t);
        break;
      case ScalarOp::eq: return iconst(x == y, DType::b8);
      case ScalarOp::ne: return iconst(x != y, DType::b8);
      case ScalarOp::lt: return iconst(x < y, DType::b8);
      case ScalarOp::le: return iconst(x <= y, DType::b8);
      case ScalarOp::gt: return iconst(x > y, DType::b8);
      case ScalarOp::ge: return iconst(x >= y, DType::b8);
      default: break;
    }
  }
  auto is = [&](ValueId v, int64_t c) { return is_const(v) && !is_floating(t) && def(v).iimm == c; };
  if (integer) {
    switch (op) {
      case ScalarOp::add:
        if (is(a, 0)) return b;
        if (is(b, 0)) return a;
        break;
      case ScalarOp::sub:
        if (is(b, 0)) return a;
        break;
      case ScalarOp::mul:
        if (is(a, 1)) return b;
        if (is(b, 1)) return a;
        if (is(a, 0) || is(b, 0)) return iconst(0, t);
        break;
      case ScalarOp::idiv:
        if (is(b, 1)) return a;
        break;
      case ScalarOp::imod:
        if (is(b, 1)) return iconst(0, t);
        break;
      default: break;
    }
  }
  if (t == DType::b8) {
    if (op == ScalarOp::and_) {
      if (is(a, 1)) return b;
      if (is(b, 1)) return a;
      if (is(a, 0) || is(b, 0)) return iconst(0, DType::b8);
    }
    if (op == ScalarOp::or_) {
      if (is(a, 0)) return b;
      if (is(b, 0)) return a;
      if (is(a, 1) || is(b, 1)) return iconst(1, DType::b8);
    }
  }
  // x * 1 is exact in IEEE arithmetic too.
  if (is_floating(t) && op == ScalarOp::mul) {
    if (is_const(b) && def(b).fimm == 1.0) return a;
    if (is_const(a) && def(a).fimm == 1.0) return b;
  }
  return kNoValue;
}

ValueId KernelBuilder::binary(ScalarOp op, ValueId a, ValueId b) {
  KILN_CHECK(type(a) == type(b), "kernel builder: ", scalar_op_name(op), " of ",
             dtype_name(type(a)), " and ", dtype_name(type(b)));
  if (ValueId f = fold_binary(op, a, b); f != kNoValue) return f;
  // Commutative ops get a canonical operand order so CSE sees a+b == b+a.
  switch (op) {
    case ScalarOp::add:
    case ScalarOp::mul:
    case ScalarOp::eq:
    case ScalarOp::ne:
    case ScalarOp::and_:
    case ScalarOp::or_:
      if (a > b) std::swap(a, b);
      break;
    default: break;
  }
  ValueDef d;
  d.op = op;
  d.type = is_comparison(op) ? DType::b8 : type(a);
  d.args[0] = a;
  d.args[1] = b;
  return add_value(d);
}

ValueId KernelBuilder::select(ValueId c, ValueId a, ValueId b) {
  KILN_CHECK(type(c) == DType::b8 && type(a) == type(b), "kernel builder: select types");
  if (is_const(c)) return def(c).iimm ? a : b;
  if (a == b) return a;
  ValueDef d;
  d.op = ScalarOp::select;
  d.type = type(a);
  d.args[0] = c;
  d.args[1] = a;
  d.args[2] = b;
  return add_value(d);
}

void KernelBuilder::push_stmt(Stmt s) {
  blocks_.back()->push_back(std::move(s));
}

void KernelBuilder::open_block(Stmt s) {
  blocks_.back()->push_back(std::move(s));
  blocks_.push_back(&blocks_.back()->back().body);
  scopes_.emplace_back();
}

void KernelBuilder::close_block(StmtKind kind) {
  KILN_CHECK(blocks_.size() > 1, "kernel builder: no open block to close");
  blocks_.pop_back();
  scopes_.pop_back();
  KILN_CHECK(blocks_.back()->back().kind == kind, "kernel builder: mismatched block close");
}

void KernelBuilder::store(int32_t buffer, ValueId idx, ValueId value) {
  Stmt s;
  s.kind = StmtKind::store;
  s.ref = buffer;
  s.index = idx;
  s.value = value;
  push_stmt(std::move(s));
}

int32_t KernelBuilder::begin_loop(int64_t extent) {
  Stmt s;
  s.kind = StmtKind::loop;
  s.ref = k_.num_loops++;
  s.extent = extent;
  open_block(std::move(s));
  return k_.num_loops - 1;
}

void KernelBuilder::end_loop() {
  close_block(StmtKind::loop);
}

void KernelBuilder::begin_if(ValueId cond) {
  Stmt s;
  s.kind = StmtKind::if_;
  s.value = cond;
  open_block(std::move(s));
}

void KernelBuilder::end_if() {
  close_block(StmtKind::if_);
}

void KernelBuilder::acc_init(int32_t acc) {
  Stmt s;
  s.kind = StmtKind::acc_init;
  s.ref = acc;
  push_stmt(std::move(s));
}

void KernelBuilder::acc_update(int32_t acc, ValueId value, ValueId position) {
  Stmt s;
  s.kind = StmtKind::acc_update;
  s.ref = acc;
  s.value = value;
  s.index = position;
  push_stmt(std::move(s));
}

ValueId KernelBuilder::memo_find(const std::string& key) const {
  for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
    auto it = s->memo.find(key);
    if (it != s->memo.end()) return it->second;
  }
  return kNoValue;
}

void KernelBuilder::memo_put(const std::string& key, ValueId v) {
  scopes_.back().memo[key] = v;
}

}  // namespace kiln::kir
