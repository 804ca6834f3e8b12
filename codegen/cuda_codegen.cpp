// Kernel IR -> CUDA C (see cuda_backend.h and cuda_codegen.h).
//
// Every `let` becomes `const T vN = expr;` (constants and loop variables are
// written inline), loops are counted `for` loops over `long long`, and all
// index arithmetic is the kernel IR's, with its static extents as constants.
// Registers hold bool as `bool`; memory holds it as one byte (unsigned char).
// Integer data arithmetic wraps (through kiln_add & co.); index arithmetic
// (non-negative i64 built from loop variables and constants) is plain C.
//
// Three forms of kernel (CudaLaunch says which):
//   GridStride   the outer loop i0 strides over the grid: one thread per element
//                (or per row, for reductions with short rows, run serially).
//   flattened    an elementwise kernel over rows x an inner loop strides over
//                rows * inner, so a few long rows still fill the GPU.
//   BlockPerRow  reductions: a block per row (rows stride over the grid); the
//                top-level loops are split over the block's threads, each thread
//                folds its elements into private accumulators, and after each
//                such loop the block reduces them (warp shuffles, then shared
//                memory across warps) so every thread holds the row's value
//                for the epilogue. Stores outside the split loops (one value
//                per row) are made by thread 0.
#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include "codegen/cuda_codegen.h"
#include "codegen/lower.h"
#include "ir/error.h"
#include "runtime/object_cache.h"

namespace kiln {
namespace {

using kir::ScalarOp;
using kir::StmtKind;
using kir::ValueId;
using namespace cuda_c;

// Bump when the generated code changes meaning or shape (it is part of every source).
constexpr const char* kCudaCodegenVersion = "kiln-cuda-codegen 2";
// Replaced by the kernel's name, a hash of the source written with it.
constexpr const char* kNamePlaceholder = "KILN_KERNEL_NAME";

// The starting value of an accumulator: its reduction's identity (ops.def).
std::string acc_init(const kir::Accumulator& a) {
  const kir::Immediate v = kir::identity_of(a.op, a.type);
  if (a.type == DType::b8) return v.i ? "1" : "0";  // bool accumulators are ints
  // So are those of the types narrower than int (acc_type): an int literal.
  if (dtype_size(a.type) < 4) return literal(DType::i32, 0, v.i);
  return literal(a.type, v.f, v.i);
}

bool is_arg(const kir::Accumulator& a) { return a.arg(); }

// The table's binary arith ops as C on operands `x` and `y` of type t, for
// elementwise values and for accumulators alike (and the binary math ops, as
// combines). `plain`: no integer
// wrap-around can happen (floats, index arithmetic), so C's operators serve.
std::string binary_expr(ScalarOp op, const std::string& x, const std::string& y, DType t, bool plain) {
  const bool fp = is_floating(t), boolean = t == DType::b8;
  auto bin = [&](const char* o) { return cat("(", x, " ", o, " ", y, ")"); };
  auto fn = [&](const char* f) { return cat(f, "(", x, ", ", y, ")"); };
  switch (op) {
    case ScalarOp::add:
      return boolean ? bin("||") : plain ? bin("+") : fn("kiln_add");
    case ScalarOp::sub:
      return boolean ? bin("!=") : plain ? bin("-") : fn("kiln_sub");
    case ScalarOp::mul:
      return boolean ? bin("&&") : plain ? bin("*") : fn("kiln_mul");
    case ScalarOp::div:
      return fp ? bin("/") : boolean ? bin("&&") : fn("kiln_idiv");
    case ScalarOp::pow:
      if (fp) return fn(t == DType::f32 ? "powf" : "pow");
      return boolean ? cat("(", x, " || !", y, ")") : fn("kiln_ipow");
    case ScalarOp::fmod:
      return boolean ? "false" : fn("kiln_fmod");
    case ScalarOp::remainder:
      return boolean ? "false" : fn("kiln_remainder");
    case ScalarOp::max:
      return boolean ? bin("||") : fn("kiln_max");
    case ScalarOp::min:
      return boolean ? bin("&&") : fn("kiln_min");
    default:
      // A binary math op (a scan's combine: logaddexp): kiln_<op> in cuda_math.cpp.
      if (kir::is_float_only(op) && kir::scalar_op_arity(op) == 2)
        return cat("kiln_", kir::scalar_op_name(op), "(", x, ", ", y, ")");
      throw Error(cat("CUDA backend: ", kir::scalar_op_name(op), " is not a binary arith op"));
  }
}

// How the outer loop is spread over the GPU (see the file comment).
enum class Form { grid_stride, flattened, block_per_row };

class Emitter {
 public:
  Emitter(const kir::Kernel& k, Form form) : k_(k), form_(form) {
    KILN_CHECK(k.params.empty(), "internal: CUDA kernels take no run-time parameters (", k.name,
               " is a CPU kernel template)");
    index_.assign(k.values.size(), 0);
    for (size_t i = 0; i < k.values.size(); ++i) {
      const kir::ValueDef& d = k.values[i];
      bool idx = d.type == DType::i64;
      switch (d.op) {
        case ScalarOp::index:
        case ScalarOp::const_:
          break;
        case ScalarOp::add:
        case ScalarOp::sub:
        case ScalarOp::mul:
        case ScalarOp::idiv:
        case ScalarOp::imod:
        case ScalarOp::select:
          for (int a = d.op == ScalarOp::select ? 1 : 0; a < 3 && d.args[a] >= 0; ++a)
            idx = idx && index_[size_t(d.args[a])];
          break;
        default:
          idx = false;
      }
      index_[i] = idx;
    }
    block_acc_.assign(k.accs.size(), 0);
    reduced_.assign(k.accs.size(), 0);
  }

  std::string run() {
    os_ << "// Generated by Kiln (" << kCudaCodegenVersion << "): "
        << (form_ == Form::block_per_row ? "one block per row"
            : form_ == Form::flattened   ? "grid-stride over rows x inner"
                                         : "grid-stride")
        << ".\n"
        << cuda_device_helpers() << "\n";
    for (size_t t = 0; t < k_.tables.size(); ++t) table(t);
    // Each accumulator's combine op, for block reductions: the code its updates use.
    for (size_t a = 0; a < k_.accs.size(); ++a) {
      const kir::Accumulator& acc = k_.accs[a];
      if (acc.arg() || form_ != Form::block_per_row) continue;
      os_ << "struct " << kNamePlaceholder << "_combine" << a << " {\n  template <class T> __device__ __forceinline__ T "
          << "operator()(T x, T y) const { return "
          << binary_expr(kir::combine_of(acc.op), "x", "y", acc.type, is_floating(acc.type)) << "; }\n};\n";
    }
    os_ << "extern \"C\" __global__ void " << kNamePlaceholder
        << "(void* const* buffers, long long begin, long long end) {\n";
    depth_ = 1;
    buffers();
    for (size_t a = 0; a < k_.accs.size(); ++a) {
      const char* t = acc_type(k_.accs[a].type);
      if (form_ == Form::block_per_row) {
        line() << "__shared__ " << t << " kiln_sh" << a << "[32];\n";
        if (is_arg(k_.accs[a])) line() << "__shared__ long long kiln_sh" << a << "p[32];\n";
      }
      line() << t << " a" << a << ";\n";
      if (is_arg(k_.accs[a])) line() << "long long a" << a << "p;\n";
    }
    const char* first = "blockIdx.x * (long long)blockDim.x + threadIdx.x";
    const char* stride = "gridDim.x * (long long)blockDim.x";
    switch (form_) {
      case Form::grid_stride:
        line() << "for (long long i0 = begin + " << first << "; i0 < end; i0 += " << stride
               << ") {\n";
        nested(k_.body);
        break;
      case Form::block_per_row:
        line() << "for (long long i0 = begin + blockIdx.x; i0 < end; i0 += gridDim.x) {\n";
        nested(k_.body);
        break;
      case Form::flattened: {
        const kir::Stmt& loop = k_.body.back();
        line() << "for (long long t = begin + " << first << "; t < end; t += " << stride << ") {\n";
        ++depth_;
        line() << "const long long i0 = t / " << int_literal(loop.extent, DType::i64) << ";\n";
        line() << "const long long i" << loop.ref << " = t - i0 * "
               << int_literal(loop.extent, DType::i64) << ";\n";
        block(std::vector<kir::Stmt>(k_.body.begin(), k_.body.end() - 1));
        ++loops_;
        block(loop.body);
        --loops_;
        --depth_;
        break;
      }
    }
    line() << "}\n";
    os_ << "}\n";
    return os_.str();
  }

 private:
  std::ostream& line() {
    for (int i = 0; i < depth_; ++i) os_ << "  ";
    return os_;
  }

  void table(size_t t) {
    const kir::Table& tab = k_.tables[t];
    os_ << "static __device__ const " << mem_type(tab.dtype) << " " << kNamePlaceholder << "_t" << t
        << "[" << tab.size() << "] = {";
    for (int64_t j = 0; j < tab.size(); ++j) {
      if (j) os_ << (j % 8 ? ", " : ",\n    ");
      if (!tab.fdata.empty())
        os_ << float_literal(tab.fdata[size_t(j)], tab.dtype);
      else if (tab.dtype == DType::b8)
        os_ << (tab.idata[size_t(j)] ? 1 : 0);
      else
        os_ << int_literal(tab.idata[size_t(j)], tab.dtype);
    }
    os_ << "};\n";
  }

  // Pointers to the buffers the body uses; read-only ones are const. An output
  // written in place of an input is stored through the input's pointer.
  void buffers() {
    const size_t n = k_.buffers.size();
    std::vector<char> read(n, 0);
    std::vector<char>& written = written_;
    written.assign(n, 0);
    for (const kir::ValueDef& d : k_.values)
      if (d.op == ScalarOp::load) read[size_t(d.ref)] = 1;
    mark_stores(k_.body, written);
    for (size_t i = 0; i < n; ++i) {
      if (!read[i] && !written[i]) continue;
      const char* t = mem_type(k_.buffers[i].dtype);
      const char* c = written[i] ? "" : "const ";
      line() << c << t << "* __restrict__ b" << i << " = (" << c << t << "*)buffers[" << i
             << "];\n";
    }
  }

  void mark_stores(const std::vector<kir::Stmt>& body, std::vector<char>& written) {
    for (const kir::Stmt& s : body) {
      if (s.kind == StmtKind::store) written[size_t(target(s.ref))] = 1;
      mark_stores(s.body, written);
    }
  }

  int32_t target(int32_t buffer) const {
    const int32_t alias = k_.buffers[size_t(buffer)].alias;
    return alias >= 0 ? alias : buffer;
  }

  // ---- Values ----

  std::string ref(ValueId v) const {
    const kir::ValueDef& d = k_.values[size_t(v)];
    if (d.op == ScalarOp::const_) return literal(d.type, d.fimm, d.iimm);
    if (d.op == ScalarOp::index) return cat("i", std::to_string(d.ref));
    return cat("v", std::to_string(v));
  }

  std::string cast(const std::string& x, DType from, DType to) const {
    if (from == to) return x;
    if (to == DType::b8) return cat("(", x, " != 0)");
    // A float becomes a small integer through int64, wrapping (runtime/strided_loop.h: convert).
    if (is_floating(from) && dtype_size(to) < 4) return cat("(", reg_type(to), ")(long long)", x);
    return cat("(", reg_type(to), ")", x);
  }

  std::string call(const char* f32, const char* f64, const kir::ValueDef& d) const {
    std::string s = cat(d.type == DType::f32 ? f32 : f64, "(", ref(d.args[0]));
    if (d.args[1] >= 0) s.append(cat(", ", ref(d.args[1])));
    return s.append(")");
  }

  std::string expr(ValueId id) const {
    const kir::ValueDef& d = k_.values[size_t(id)];
    const DType t = d.type;
    const bool fp = is_floating(t), boolean = t == DType::b8;
    const bool plain = fp || index_[size_t(id)];  // no wrap-around needed
    auto a = [&](int i) { return ref(d.args[i]); };
    auto bin = [&](const char* op) { return cat("(", a(0), " ", op, " ", a(1), ")"); };
    auto fn = [&](const char* f) { return cat(f, "(", a(0), ", ", a(1), ")"); };
    auto fn1 = [&](const char* f) { return cat(f, "(", a(0), ")"); };
    switch (d.op) {
      case ScalarOp::const_:
      case ScalarOp::index:
        return ref(id);
      case ScalarOp::param:  // refused in the constructor
        break;
      case ScalarOp::load: {
        // Read-only buffers go through the read-only data cache (ld.global.nc).
        const std::string b = cat("b", std::to_string(d.ref));
        const std::string v =
            written_[size_t(d.ref)] ? cat(b, "[", a(0), "]") : cat("__ldg(", b, " + ", a(0), ")");
        return boolean ? cat("(", v, " != 0)") : v;
      }
      case ScalarOp::table: {
        const std::string s = cat(kNamePlaceholder, "_t", std::to_string(d.ref), "[", a(0), "]");
        return boolean ? cat("(", s, " != 0)") : s;
      }
      case ScalarOp::acc: {
        const kir::Accumulator& acc = k_.accs[size_t(d.ref)];
        const std::string n = cat("a", std::to_string(d.ref));
        if (is_arg(acc)) return cat(n, "p");
        return acc.type == DType::b8 ? cat("(", n, " != 0)") : n;
      }
      case ScalarOp::cast:
        return cast(a(0), k_.values[size_t(d.args[0])].type, t);
      case ScalarOp::select:
        return cat("(", a(0), " ? ", a(1), " : ", a(2), ")");
      case ScalarOp::neg:
        return fp ? cat("(-", a(0), ")") : boolean ? a(0) : fn1("kiln_neg");
      case ScalarOp::abs:
        return fp ? call("fabsf", "fabs", d) : boolean ? a(0) : fn1("kiln_iabs");
      case ScalarOp::sign:
        return boolean ? a(0) : fn1("kiln_sign");
      case ScalarOp::relu:
        return boolean || t == DType::u8 ? a(0)
                                         : cat("(", a(0), " < ", literal(t, 0, 0), " ? ",
                                               literal(t, 0, 0), " : ", a(0), ")");
      case ScalarOp::not_:
        return cat("(!", a(0), ")");
      case ScalarOp::add:
      case ScalarOp::sub:
      case ScalarOp::mul:
      case ScalarOp::div:
      case ScalarOp::pow:
      case ScalarOp::fmod:
      case ScalarOp::remainder:
      case ScalarOp::max:
      case ScalarOp::min:
        return binary_expr(d.op, a(0), a(1), t, plain);
      case ScalarOp::eq:
        return bin("==");
      case ScalarOp::ne:
        return bin("!=");
      case ScalarOp::lt:
        return bin("<");
      case ScalarOp::le:
        return bin("<=");
      case ScalarOp::gt:
        return bin(">");
      case ScalarOp::ge:
        return bin(">=");
      case ScalarOp::and_:
        return bin("&&");
      case ScalarOp::or_:
        return bin("||");
      case ScalarOp::idiv:
        return bin("/");
      case ScalarOp::imod:
        return bin("%");
      case ScalarOp::philox:
        return fn(t == DType::f32 ? "kiln_philox_f32"
                  : t == DType::f64 ? "kiln_philox_f64"
                                    : "kiln_philox_i64");
      case ScalarOp::philox_below:
        return cat("kiln_philox_below(", a(0), ", ", a(1), ", ", a(2), ")");
#define KILN_CUDA_MATH_CASE(k, name) case ScalarOp::k:
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, cost, scalar, ...) \
  KILN_SCALAR_MATH(KILN_CUDA_MATH_CASE, name, scalar)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_CUDA_MATH_CASE
        // The table's math ops: kiln_<op> in cuda_math.cpp, of one operand or two.
        if (kir::scalar_op_arity(d.op) == 2)
          return cat("kiln_", kir::scalar_op_name(d.op), "(", a(0), ", ", a(1), ")");
        return cat("kiln_", kir::scalar_op_name(d.op), "(", a(0), ")");
    }
    throw Error(cat("CUDA backend: no C for kernel IR op ", kir::scalar_op_name(d.op)));
  }

  // ---- Statements ----

  void block(const std::vector<kir::Stmt>& body) {
    for (const kir::Stmt& s : body) stmt(s);
  }

  void stmt(const kir::Stmt& s) {
    switch (s.kind) {
      case StmtKind::let: {
        const kir::ValueDef& d = k_.values[size_t(s.value)];
        if (d.op == ScalarOp::const_ || d.op == ScalarOp::index) break;
        line() << "const " << reg_type(d.type) << " v" << s.value << " = " << expr(s.value)
               << ";\n";
        break;
      }
      case StmtKind::store: {
        const DType t = k_.buffers[size_t(s.ref)].dtype;
        std::string v = ref(s.value);
        if (t == DType::b8) v = cat("(unsigned char)", v);
        const bool one_thread = form_ == Form::block_per_row && !split_;
        line() << (one_thread ? "if (threadIdx.x == 0) " : "") << "b" << target(s.ref) << "["
               << ref(s.index) << "] = " << v << ";\n";
        break;
      }
      case StmtKind::loop: {
        const std::string i = cat("i", std::to_string(s.ref));
        const std::string e = int_literal(s.extent, DType::i64);
        const bool split = form_ == Form::block_per_row && loops_ == 0;
        if (split)
          line() << "for (long long " << i << " = threadIdx.x; " << i << " < " << e << "; " << i
                 << " += blockDim.x) {\n";
        else
          line() << "for (long long " << i << " = 0; " << i << " < " << e << "; ++" << i << ") {\n";
        ++loops_;
        split_ = split_ || split;
        nested(s.body);
        split_ = split_ && !split;
        --loops_;
        line() << "}\n";
        if (split) reduce_after(s.body);
        break;
      }
      case StmtKind::if_:
        line() << "if (" << ref(s.value) << ") {\n";
        nested(s.body);
        line() << "}\n";
        break;
      case StmtKind::acc_init: {
        const kir::Accumulator& a = k_.accs[size_t(s.ref)];
        if (loops_ == 0) block_acc_[size_t(s.ref)] = 1;
        line() << "a" << s.ref << " = " << acc_init(a) << ";\n";
        if (is_arg(a)) line() << "a" << s.ref << "p = 0;\n";
        break;
      }
      case StmtKind::acc_update: {
        // The reduction's combine op (ops.def), as an elementwise op computes it.
        const kir::Accumulator& a = k_.accs[size_t(s.ref)];
        const std::string n = cat("a", std::to_string(s.ref));
        std::string x = ref(s.value);
        // bool and the types narrower than int accumulate as int (acc_type).
        if (a.type == DType::b8 || dtype_size(a.type) < 4) x = cat("(int)", x);
        if (a.arg())
          line() << "kiln_arg_update(" << (kir::combine_of(a.op) == ScalarOp::max ? "true" : "false")
                 << ", " << n << ", " << n << "p, " << x << ", " << ref(s.index) << ");\n";
        else
          line() << n << " = " << binary_expr(kir::combine_of(a.op), n, x, a.type, is_floating(a.type))
                 << ";\n";
        break;
      }
    }
  }

  void nested(const std::vector<kir::Stmt>& body) {
    ++depth_;
    block(body);
    --depth_;
  }

  void updated_accs(const std::vector<kir::Stmt>& body, std::set<int32_t>& out) const {
    for (const kir::Stmt& s : body) {
      if (s.kind == StmtKind::acc_update) out.insert(s.ref);
      updated_accs(s.body, out);
    }
  }

  // After a loop split over the block: combine the threads' partial accumulators.
  void reduce_after(const std::vector<kir::Stmt>& body) {
    std::set<int32_t> accs;
    updated_accs(body, accs);
    for (int32_t a : accs) {
      if (!block_acc_[size_t(a)]) continue;
      if (reduced_[size_t(a)])
        throw Error(cat("CUDA backend: accumulator acc", std::to_string(a), " of ", k_.name,
                        " is updated in two parallel loops"));
      reduced_[size_t(a)] = 1;
      const kir::Accumulator& acc = k_.accs[size_t(a)];
      const std::string n = cat("a", std::to_string(a)), sh = cat("kiln_sh", std::to_string(a));
      if (is_arg(acc)) {
        line() << "kiln_block_arg(" << (kir::combine_of(acc.op) == ScalarOp::max ? "true" : "false")
               << ", " << n << ", " << n << "p, " << sh << ", " << sh << "p, " << acc_init(acc) << ");\n";
        continue;
      }
      line() << n << " = kiln_block_reduce(" << n << ", " << sh << ", " << acc_init(acc) << ", "
             << kNamePlaceholder << "_combine" << a << "());\n";
    }
  }

  const kir::Kernel& k_;
  Form form_;
  std::ostringstream os_;
  int depth_ = 0;
  int loops_ = 0;                // inner loops around the current statement
  bool split_ = false;           // inside a loop split over the block's threads
  std::vector<char> index_;      // per value: plain (non-wrapping) index arithmetic
  std::vector<char> written_;    // per buffer: stored to (through it, for aliases)
  std::vector<char> block_acc_;  // per accumulator: initialised once per row
  std::vector<char> reduced_;
};

// The longest top-level loop: a reduction's row length.
int64_t longest_top_loop(const std::vector<kir::Stmt>& body) {
  int64_t e = 0;
  for (const kir::Stmt& s : body) {
    if (s.kind == StmtKind::loop) e = std::max(e, s.extent);
    if (s.kind == StmtKind::if_) e = std::max(e, longest_top_loop(s.body));
  }
  return e;
}

// An elementwise kernel over rows: lets, then one loop that ends the body.
bool flattenable(const kir::Kernel& k) {
  if (!k.accs.empty() || k.body.empty() || k.body.back().kind != StmtKind::loop ||
      k.body.back().extent == 0)
    return false;
  for (size_t i = 0; i + 1 < k.body.size(); ++i)
    if (k.body[i].kind != StmtKind::let) return false;
  return true;
}

}  // namespace

CudaKernelSource emit_cuda_kernel(const kir::Kernel& k, const CudaCodegenOptions& opts) {
  if (opts.max_block < 32 || opts.max_block > 1024 || opts.max_block % 32 != 0)
    throw Error(cat("CudaCodegenOptions::max_block must be a multiple of 32 in [32, 1024], not ",
                    std::to_string(opts.max_block)));
  if (opts.grid_stride_block < 1 || opts.grid_stride_block > 1024)
    throw Error(cat("CudaCodegenOptions::grid_stride_block must be in [1, 1024], not ",
                    std::to_string(opts.grid_stride_block)));
  CudaKernelSource out;
  const int64_t row = longest_top_loop(k.body);
  Form form = Form::grid_stride;
  out.launch.range = k.range;
  out.launch.block = opts.grid_stride_block;
  if (k.serial_inner) {
    // Each outer iteration on one thread, its loops in order (grid-stride).
  } else if (!k.accs.empty() && row >= opts.block_per_row_min_extent) {
    form = Form::block_per_row;
    out.launch.kind = CudaLaunch::BlockPerRow;
    out.launch.block =
        int(std::min<int64_t>(opts.max_block, std::max<int64_t>(32, (row + 31) / 32 * 32)));
  } else if (flattenable(k)) {
    form = Form::flattened;
    out.launch.inner = k.body.back().extent;
    out.launch.range = k.range * out.launch.inner;
  }
  std::string src = Emitter(k, form).run();
  out.name = cat("kiln_cuda_", stable_hash_hex(src));
  for (size_t p = src.find(kNamePlaceholder); p != std::string::npos;
       p = src.find(kNamePlaceholder, p))
    src.replace(p, std::string_view(kNamePlaceholder).size(), out.name);
  out.source = std::move(src);
  return out;
}

CudaKernelSource generate_cuda_kernel(const Graph& g, const FusionGroup& group) {
  return generate_cuda_kernel(g, group, CudaCodegenOptions{});
}

CudaKernelSource generate_cuda_kernel(const Graph& g, const FusionGroup& group,
                                      const CudaCodegenOptions& opts) {
  LowerOptions lo;
  lo.epilogue_in_place = opts.epilogue_in_place;
  return generate_cuda_kernel(g, group, lower_group(g, group, lo), opts);
}

CudaKernelSource generate_cuda_kernel(const Graph& g, const FusionGroup& group, kir::Kernel k,
                                      const CudaCodegenOptions& opts) {
  KernelInfo info = describe_kernel(g, group, k);
  k.name = info.name;
  bool has_output = false;
  for (const kir::Buffer& b : k.buffers) has_output = has_output || b.output;
  CudaKernelSource out;
  if (has_output) {
    try {
      out = emit_cuda_kernel(k, opts);
    } catch (Error& e) {
      e.attach(first_loc(g, group));
      throw;
    }
    // No element to write (an empty tensor): nothing to launch, and NVRTC
    // would warn about index arithmetic by the zero extent.
    if (out.launch.range == 0) out.needs_kernel = false;
  } else {
    out.needs_kernel = false;  // a lone matmul: cuBLAS does all of it
    out.name = info.name;
  }
  for (const kir::Buffer& b : k.buffers) out.buffers.push_back(b.value);
  out.kernel_ir = kir::print_kernel(k);
  out.info = std::move(info);
  return out;
}

}  // namespace kiln
