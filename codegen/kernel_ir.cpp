// Kernel IR: op names, the printer, the verifier and the builder.
#include "codegen/kernel_ir.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>
#include <unordered_set>

#include "ir/attrs.h"
#include "ir/error.h"

namespace kiln::kir {

namespace {

struct ScalarOpInfo {
  std::string_view name;
  int arity;
  ScalarRule kind;
  OpKind table_op;  // the op table's row, for table ops
};

// "not_" is spelled "not".
constexpr std::string_view spelling(std::string_view enumerator) {
  return enumerator.ends_with('_') ? enumerator.substr(0, enumerator.size() - 1) : enumerator;
}

constexpr ScalarOpInfo kScalarOps[] = {
    {"const", 0, ScalarRule::none, OpKind::arg},
    {"index", 0, ScalarRule::none, OpKind::arg},
    {"load", 1, ScalarRule::none, OpKind::arg},
    {"table", 1, ScalarRule::none, OpKind::arg},
    {"acc", 0, ScalarRule::none, OpKind::arg},
    {"param", 0, ScalarRule::none, OpKind::arg},
    {"cast", 1, ScalarRule::none, OpKind::arg},
    {"select", 3, ScalarRule::none, OpKind::arg},
#define KILN_KIR_INFO(kind, k, name, arity) {spelling(#k), arity, ScalarRule::kind, OpKind::name},
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, cost, scalar, ...) \
  KILN_SCALAR_KIR(KILN_KIR_INFO, name, arity, scalar)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_KIR_INFO
    {"idiv", 2, ScalarRule::none, OpKind::arg},
    {"imod", 2, ScalarRule::none, OpKind::arg},
    {"philox", 2, ScalarRule::none, OpKind::arg},
    {"philox_below", 3, ScalarRule::none, OpKind::arg},
};
static_assert(std::size(kScalarOps) == size_t(ScalarOp::philox_below) + 1);

const ScalarOpInfo& info(ScalarOp op) {
  return kScalarOps[static_cast<size_t>(op)];
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
      os_ << "  buf" << i << " = " << (b.output ? "out " : "in ") << dtype_name(b.dtype);
      if (o_.skeleton || b.sized_at_run_time)
        os_ << "[rank " << b.shape.size() << (b.sized_at_run_time ? ", sized at run time]" : "]");
      else
        os_ << shape_str(b.shape);
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
      os_ << "  acc" << i << " = " << op_name(k_.accs[i].op) << " " << dtype_name(k_.accs[i].type)
          << (k_.accs[i].ordered ? " ordered" : "") << "\n";
    for (size_t i = 0; i < k_.params.size(); ++i)
      os_ << "  p" << i << " = param " << dtype_name(k_.params[i]) << "\n";
    os_ << "parallel i0 in [0, ";
    if (o_.skeleton || !k_.params.empty() || any_sized_at_run_time())
      os_ << "range";  // the caller's, not part of the code
    else
      os_ << k_.range;
    os_ << "):" << (k_.serial_inner ? "  ; inner loops in order" : "") << "\n";
    block(k_.body, 1);
    return os_.str();
  }

 private:
  bool any_sized_at_run_time() const {
    for (const Buffer& b : k_.buffers)
      if (b.sized_at_run_time) return true;
    return false;
  }
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
          case ScalarOp::const_:
            os_ << " " << (o_.skeleton ? "?" : const_str(v));
            break;
          case ScalarOp::param:
            os_ << " p" << v.ref;
            break;
          case ScalarOp::index:
            os_ << " i" << v.ref;
            break;
          case ScalarOp::load:
            os_ << " buf" << v.ref << "[%" << v.args[0] << "]";
            break;
          case ScalarOp::table:
            os_ << " table" << v.ref << "[%" << v.args[0] << "]";
            break;
          case ScalarOp::acc:
            os_ << " acc" << v.ref;
            break;
          default:
            for (int i = 0; i < scalar_op_arity(v.op); ++i) os_ << (i ? ", %" : " %") << v.args[i];
        }
        os_ << " : " << dtype_name(v.type) << "\n";
        break;
      }
      case StmtKind::store:
        os_ << "store buf" << s.ref << "[%" << s.index << "] = %" << s.value << "\n";
        break;
      case StmtKind::loop:
        os_ << "for i" << s.ref << " in [0, ";
        if (s.extent_param >= 0)
          os_ << "p" << s.extent_param;
        else if (o_.skeleton)
          os_ << "?";
        else
          os_ << s.extent;
        os_ << "):\n";
        block(s.body, d + 1);
        break;
      case StmtKind::if_:
        os_ << "if %" << s.value << ":\n";
        block(s.body, d + 1);
        break;
      case StmtKind::acc_init:
        os_ << "acc" << s.ref << " = init\n";
        break;
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
    for (DType t : k_.params)
      check(t == DType::i64 || t == DType::f64, "parameters are i64 or f64, not ", dtype_name(t));
    for (const Buffer& b : k_.buffers) {
      if (b.alias >= 0) {
        check(b.output && b.alias < int32_t(k_.buffers.size()) && !k_.buffers[b.alias].output,
              b.name, ": alias must name an input buffer");
        check(k_.buffers[b.alias].dtype == b.dtype &&
                  (k_.buffers[b.alias].numel() == b.numel() || b.sized_at_run_time),
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
    const int n = scalar_op_arity(d.op);
    for (int i = 0; i < n; ++i) use(d.args[i]);
    std::ostringstream w;
    w << "%" << id << " (" << scalar_op_name(d.op) << ")";
    const std::string what = w.str();
    switch (d.op) {
      case ScalarOp::const_:
        break;
      case ScalarOp::param:
        check(d.ref >= 0 && d.ref < int32_t(k_.params.size()), what, ": no parameter ", d.ref);
        check(k_.params[d.ref] == (is_floating(d.type) ? DType::f64 : DType::i64), what,
              ": a floating value reads an f64 parameter, any other an i64 one");
        break;
      case ScalarOp::index:
        check(d.type == DType::i64 && d.ref >= 0 && d.ref < k_.num_loops && (*open_)[d.ref], what,
              ": index of a loop that is not open");
        break;
      case ScalarOp::load:
        check(d.ref >= 0 && d.ref < int32_t(k_.buffers.size()), what, ": no buffer ", d.ref);
        check(!k_.buffers[d.ref].output || (stored_.count(d.ref) && k_.buffers[d.ref].alias < 0),
              what, ": load from an output buffer before any store to it, or stored in place");
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
        check(d.type == (a.arg() ? DType::i64 : a.type), what, ": type mismatch");
        break;
      }
      case ScalarOp::cast:
        break;
      case ScalarOp::select:
        check(ty(d.args[0]) == DType::b8 && ty(d.args[1]) == d.type && ty(d.args[2]) == d.type,
              what, ": operand types");
        break;
      case ScalarOp::not_:
        check(d.type == DType::b8 && ty(d.args[0]) == DType::b8, what, ": expects bool");
        break;
      case ScalarOp::and_:
      case ScalarOp::or_:
        check(d.type == DType::b8 && ty(d.args[0]) == DType::b8 && ty(d.args[1]) == DType::b8, what,
              ": expects bool");
        break;
      case ScalarOp::idiv:
      case ScalarOp::imod:
        check(d.type == DType::i64 && ty(d.args[0]) == DType::i64 && ty(d.args[1]) == DType::i64,
              what, ": expects i64");
        break;
      case ScalarOp::philox:
        check((d.type == DType::f32 || d.type == DType::f64 || d.type == DType::i64) &&
                  ty(d.args[0]) == DType::i64 && ty(d.args[1]) == DType::i64,
              what, ": expects i64 key and counter, f32, f64 or i64 result");
        break;
      case ScalarOp::philox_below:
        check(d.type == DType::i64 && ty(d.args[0]) == DType::i64 && ty(d.args[1]) == DType::i64 &&
                  ty(d.args[2]) == DType::i64,
              what, ": expects i64 key, counter and bound, i64 result");
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
          check(ty(s.index) == DType::i64 && ty(s.value) == k_.buffers[s.ref].dtype, "store to buf",
                s.ref, ": type mismatch");
          stored_.insert(s.ref);
          break;
        }
        case StmtKind::loop:
          check(s.ref > 0 && s.ref < k_.num_loops && !(*open_)[s.ref], "bad loop variable i",
                s.ref);
          check(s.extent >= 0, "negative loop extent");
          check(s.extent_param < int32_t(k_.params.size()) &&
                    (s.extent_param < 0 || k_.params[s.extent_param] == DType::i64),
                "loop i", s.ref, ": its trip count must be an i64 parameter");
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
          check(a.arg() == (s.index >= 0), "acc", s.ref, ": argmax/argmin updates need a position");
          if (a.arg()) use(s.index);
          break;
        }
      }
    }
    for (ValueId v : mine) defined_[v] = 2;  // out of scope
  }

  const Kernel& k_;
  std::vector<char> defined_;  // 0 not yet, 1 visible, 2 out of scope
  std::vector<char>* open_ = nullptr;
  std::set<int32_t> stored_;  // output buffers stored to so far, in program order
};

}  // namespace

std::string_view scalar_op_name(ScalarOp op) {
  return info(op).name;
}

int scalar_op_arity(ScalarOp op) {
  return info(op).arity;
}

ScalarRule scalar_op_rule(ScalarOp op) {
  return info(op).kind;
}

ScalarOp scalar_op_of(OpKind k) {
  static const std::vector<int> of = [] {
    std::vector<int> v(size_t(kNumOps), -1);
    for (size_t i = 0; i < std::size(kScalarOps); ++i)
      if (kScalarOps[i].kind != ScalarRule::none) v[size_t(kScalarOps[i].table_op)] = int(i);
    return v;
  }();
  const int i = of[static_cast<size_t>(k)];
  KILN_CHECK(i >= 0, "kernel IR: ", op_name(k), " has no scalar op (ops.def's scalar column)");
  return static_cast<ScalarOp>(i);
}

Immediate identity_of(OpKind op, DType t) {
  const Identity id = op_info(op).identity;
  KILN_CHECK(id != Identity::none, "kernel IR: ", op_name(op), " is not a reduction");
  if (id == Identity::zero || id == Identity::one)
    return {id == Identity::one ? 1.0 : 0.0, id == Identity::one};
  const bool low = id == Identity::lowest;
  const double inf = std::numeric_limits<double>::infinity();
  switch (t) {
    case DType::f32:
    case DType::f64:
      return {low ? -inf : inf, 0};
    case DType::i32:
      return {0, low ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max()};
    case DType::i64:
      return {0, low ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max()};
    case DType::b8:
      return {0, low ? 0 : 1};
    case DType::u8:
      return {0, low ? 0 : 255};
    case DType::i8:
      return {0, low ? -128 : 127};
    case DType::i16:
      return {0, low ? -32768 : 32767};
  }
  return {};
}

ScalarOp combine_of(OpKind op) {
  KILN_CHECK(op_info(op).identity != Identity::none, "kernel IR: ", op_name(op),
             " is not a reduction");
  return scalar_op_of(op_info(op).combine);
}

std::string print_kernel(const Kernel& k, const PrintKernelOptions& opts) {
  return Printer(k, opts).run();
}

void verify_kernel(const Kernel& k) {
  Verifier(k).run();
}

int64_t divisions_per_iteration(const Kernel& k) {
  std::vector<int> loop_depth(size_t(k.num_loops), 0);
  std::vector<int> depth(k.values.size(), -1);  // the deepest loop a value depends on
  auto depth_of = [&](auto& self, ValueId v) -> int {
    if (v == kNoValue) return 0;
    int& d = depth[size_t(v)];
    if (d >= 0) return d;
    const ValueDef& def = k.values[size_t(v)];
    d = def.op == ScalarOp::index ? loop_depth[size_t(def.ref)] : 0;
    for (ValueId a : def.args) d = std::max(d, self(self, a));
    return d;
  };
  auto costly = [&](const ValueDef& def) {
    if (def.op != ScalarOp::idiv && def.op != ScalarOp::imod) return false;
    const ValueDef& by = k.values[size_t(def.args[1])];
    return by.op != ScalarOp::const_ || by.iimm <= 0 || (by.iimm & (by.iimm - 1)) != 0;
  };
  // A value's expression as text (constants by value, loop variables by number).
  std::vector<std::string> keys(k.values.size());
  auto expr_key = [&](auto& self, ValueId v) -> std::string {
    std::string& key = keys[size_t(v)];
    if (!key.empty()) return key;
    const ValueDef& def = k.values[size_t(v)];
    key = std::string(scalar_op_name(def.op)) + ":" + std::to_string(def.ref) + ":" +
          std::to_string(def.iimm) + ":" + std::to_string(def.fimm);
    for (ValueId a : def.args)
      if (a != kNoValue) key += "(" + self(self, a) + ")";
    return key;
  };
  std::unordered_set<std::string> outer;
  // trips[j]: how many times the body at loop depth j runs per outer iteration.
  std::vector<int64_t> trips{1};
  int64_t total = 0;
  auto walk = [&](auto& self, const std::vector<Stmt>& body) -> void {
    for (const Stmt& s : body) {
      if (s.kind == StmtKind::loop) {
        loop_depth[size_t(s.ref)] = int(trips.size());
        trips.push_back(trips.back() * std::max<int64_t>(s.extent, 1));
        self(self, s.body);
        trips.pop_back();
      } else if (s.kind == StmtKind::if_) {
        self(self, s.body);
      } else if (s.kind == StmtKind::let && costly(k.values[size_t(s.value)])) {
        const int d = std::min<int>(depth_of(depth_of, s.value), int(trips.size()) - 1);
        // The outer index's own divisions, made again in sibling loops (a row
        // cut into pieces), are one division each: hoisted and shared.
        if (d == 0 && !outer.insert(expr_key(expr_key, s.value)).second) continue;
        total += trips[size_t(d)];
      }
    }
  };
  walk(walk, k.body);
  return total;
}

}  // namespace kiln::kir
