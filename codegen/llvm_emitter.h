// The CPU backend's emitter: one kernel's IR -> LLVM IR with IRBuilder, shared
// by llvm_codegen.cpp (the function, its statements and values) and
// llvm_streamed_pass.cpp (the loop whose output streams past the cache). See
// llvm_codegen.cpp's head for the form of the code. Internal to codegen/; only
// the .cpp files that include LLVM use it. Like every header, it names LLVM's
// types without including LLVM's headers (tests/layering: headers_without_llvm).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/llvm_codegen.h"
#include "codegen/streamed_loop.h"

namespace llvm {
class AllocaInst;
class Argument;
class Constant;
class Function;
class GlobalVariable;
class IRBuilderBase;
class LLVMContext;
class Module;
class Twine;
class Type;
class Value;
struct Align;
}  // namespace llvm

namespace kiln::llvm_emit {

using kir::ScalarOp;
using kir::StmtKind;

/// The loop of k whose store streams under opts (streams_stores), if any.
std::optional<kir::StreamedLoop> streamed_loop(const kir::Kernel& k, const LlvmEmitOptions& opts);

class Emitter {
 public:
  /// Emits into m with builder b (an llvm::IRBuilder<> of m's context).
  Emitter(const kir::Kernel& k, llvm::Module& m, llvm::IRBuilderBase& b,
          const LlvmEmitOptions& opts);

  /// Defines `symbol` (the entry point) and `symbol.body` in the module.
  void emit(const std::string& symbol);

 private:
  void target_attrs(llvm::Function* f);
  void load_params(llvm::Argument* table);
  llvm::Value* param(DType t, int32_t ref);
  llvm::Type* reg_type(DType t);
  llvm::Type* scalar_type(DType t);
  llvm::Type* mem_type(DType t);
  llvm::Constant* constant(DType t, double f, int64_t i);
  llvm::GlobalVariable* make_table(const kir::Table& t, size_t idx);

  // ---- Statements ----

  void block(const std::vector<kir::Stmt>& body);

  // for (i = lo; i < hi; i += step) emit_body(i), the loop named `name`.
  void counted_loop(const llvm::Twine& name, llvm::Value* lo, llvm::Value* hi, int64_t step,
                    const std::function<void(llvm::Value*)>& emit_body);

  void loop(int32_t var, llvm::Value* lo, llvm::Value* hi, const std::vector<kir::Stmt>& body);
  // Where a short loop over [lo, hi) is cut so that its iterations are whole
  // vectors (see loop), or 0 when it is not.
  int64_t overlap_cut(llvm::Value* lo, llvm::Value* hi, const std::vector<kir::Stmt>& body) const;
  // The width, in bits, of the host's widest vectors.
  static int vector_bits();
  llvm::Value* extent(const kir::Stmt& loop);
  void pass(const kir::Stmt& s, llvm::Value* lo, llvm::Value* hi);
  void stmt(const kir::Stmt& s);
  llvm::Value* acc_init_value(const kir::Accumulator& a);
  void acc_update(const kir::Stmt& s);
  llvm::Value* operand(kir::ValueId a);
  llvm::Value* base_pointer(int32_t buffer);
  llvm::Value* address(int32_t buffer, llvm::Value* idx);
  llvm::Align elem_align(DType t);

  // ---- Prefetching the next row ----
  //
  // A row-parallel kernel that passes over its row more than once (softmax: the
  // max, then exp and the sum, then the scale) reads the row from memory in its
  // first pass and from cache in the others, so memory and arithmetic take turns.
  // While a later pass runs (the carrier: the last pass over the row that
  // computes a math op, softmax's exp pass, layer norm's output pass with its
  // sqrt), the first pass's loads of the next row are prefetched, 16 cache
  // lines at the top of each block of 16 lines' elements: the carrier becomes
  // two loops, the blocks outside, the unchanged body inside (vectorised as
  // before; a block of one line cost a horizontal reduction per line). A pass of
  // adds and multiplies alone is too short to hide the prefetches (layer norm's
  // second pass as carrier made its rows 25% slower; its output pass made them
  // faster). Only loads at `row offset + first pass index`, the row offset made
  // of i0, constants, parameters, +, - and *.
  struct RowPrefetch {
    const kir::Stmt* carrier = nullptr;                   // the pass that prefetches
    int64_t elem_bytes = 0;                               // of every prefetched load
    std::vector<std::pair<int32_t, kir::ValueId>> loads;  // buffer, row offset
  };
  static constexpr int64_t kLineBytes = 64;
  static constexpr int64_t kBlockLines = 16;     // within the miss buffers of current cores
  static constexpr int64_t kMinRowBytes = 4096;  // shorter rows: the hardware prefetcher suffices

  void plan_row_prefetch();

  // Whether a body defines a value whose op satisfies `pred`, at any depth.
  template <class Pred>
  bool evaluates(const std::vector<kir::Stmt>& body, Pred pred) const {
    for (const kir::Stmt& st : body) {
      if (st.kind == StmtKind::let && pred(k_.values[size_t(st.value)].op)) return true;
      if (evaluates(st.body, pred)) return true;
    }
    return false;
  }

  kir::ValueId row_offset(kir::ValueId index, int32_t var);
  llvm::Value* next_row_offset(kir::ValueId v);
  void prefetching_loop(const kir::Stmt& s);

  // ---- The streamed loop (llvm_streamed_pass.cpp) ----

  void streamed_pass(llvm::Value* lo, llvm::Value* hi);
  llvm::Value* linear_index(kir::ValueId v, llvm::Value* i);
  llvm::Value* vector_load(const kir::ValueDef& d, llvm::Value* i);

  // ---- Values ----

  llvm::Value* cast(llvm::Value* x, DType from, DType to);
  llvm::Value* value(const kir::ValueDef& d);
  llvm::Value* div(llvm::Value* a, llvm::Value* c, DType t);
  llvm::Value* binary(ScalarOp op, llvm::Value* a, llvm::Value* c, DType t);
  llvm::Value* modulo(llvm::Value* a, llvm::Value* c, DType t, bool floor);
  llvm::Value* compare(ScalarOp op, llvm::Value* a, llvm::Value* c, DType t);

  const kir::Kernel& k_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilderBase& b_;
  LlvmEmitOptions opts_;
  std::vector<llvm::Value*> bufptr_;
  std::vector<llvm::Value*> vals_;
  std::vector<llvm::Value*> loopvar_;
  std::vector<llvm::Value*> params_;  // the run-time parameters, loaded at entry
  RowPrefetch prefetch_;
  std::optional<kir::StreamedLoop> stream_;  // the loop whose store streams (streams_stores)
  int lanes_ = 0;      // > 0: emitting a streamed loop's vector body (reg_type's vectors)
  bool wide_ = false;  // the kernel gets the host's vector width (target_attrs)
  std::vector<llvm::AllocaInst*> acc_val_, acc_pos_;
  std::vector<llvm::GlobalVariable*> tables_;
};

}  // namespace kiln::llvm_emit
