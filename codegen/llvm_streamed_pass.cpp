// The CPU backend's streamed loop (streams_stores): the loop that
// kir::streamed_loop picks writes its output with streaming (non-temporal)
// stores, which LLVM's loop vectoriser will not emit for an output aligned to
// its element only, so the emitter (llvm_emitter.h) writes its vector body
// itself.
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>

#include <bit>

#include "codegen/llvm_emitter.h"
#include "runtime/llvm_jit.h"

namespace kiln {
namespace llvm_emit {
namespace {

// Whether the host stores past its caches with an instruction LLVM emits for
// `!nontemporal` (x86: movntps and its kin), and orders them with sfence.
bool host_streams() {
  return LlvmJit::get().cpu_features().find("+sse2") != std::string::npos;
}

}  // namespace

int Emitter::vector_bits() {
  const LlvmJit& jit = LlvmJit::get();
  if (jit.vector_width() != 0) return jit.vector_width();
  return jit.cpu_features().find("+avx") != std::string::npos ? 256 : 128;
}

std::optional<kir::StreamedLoop> streamed_loop(const kir::Kernel& k, const LlvmEmitOptions& opts) {
  if ((opts.stream_min_bytes <= 0 && !opts.stream_all) || !host_streams()) return std::nullopt;
  return kir::streamed_loop(k, opts.stream_all ? 0 : opts.stream_min_bytes);
}

// The streamed loop over [lo, hi): scalar steps (the ordinary loop) up to the
// first element whose store address is aligned to a vector, vectors of the
// host's width with aligned non-temporal stores, scalar steps for the rest.
void Emitter::streamed_pass(llvm::Value* lo, llvm::Value* hi) {
  const kir::StreamedLoop& s = *stream_;
  const kir::Stmt* store = nullptr;
  for (const kir::Stmt& st : *s.body)
    if (st.kind == StmtKind::store) store = &st;
  const int64_t elem = dtype_size(k_.buffers[size_t(s.buffer)].dtype);
  const int64_t vec_bytes = vector_bits() / 8, lanes = vec_bytes / elem;
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Value* first =
      b_.CreatePtrToInt(address(s.buffer, linear_index(store->index, lo)), i64, "nt.first");
  // Elements before the aligned one; all of them when elements are not even
  // aligned to their size (a view at an odd byte offset).
  llvm::Value* to_aligned = b_.CreateAnd(b_.CreateSub(b_.getInt64(0), first), vec_bytes - 1);
  llvm::Value* peel = b_.CreateSelect(
      b_.CreateICmpEQ(b_.CreateAnd(first, elem - 1), b_.getInt64(0)),
      b_.CreateLShr(to_aligned, uint64_t(std::countr_zero(uint64_t(elem)))), b_.CreateSub(hi, lo));
  llvm::Value* vec_lo =
      b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(lo, peel), hi, nullptr, "nt.lo");
  llvm::Value* vec_hi =
      b_.CreateAdd(vec_lo, b_.CreateAnd(b_.CreateSub(hi, vec_lo), -lanes), "nt.hi");
  loop(s.var, lo, vec_lo, *s.body);
  counted_loop("nt" + llvm::Twine(s.var), vec_lo, vec_hi, lanes, [&](llvm::Value* i) {
    loopvar_[size_t(s.var)] = i;
    lanes_ = int(lanes);
    for (const kir::Stmt& st : *s.body) {
      if (st.kind == StmtKind::store) {
        llvm::StoreInst* out =
            b_.CreateAlignedStore(operand(st.value), address(st.ref, linear_index(st.index, i)),
                                  llvm::Align(uint64_t(vec_bytes)));
        out->setMetadata(llvm::LLVMContext::MD_nontemporal,
                         llvm::MDNode::get(ctx_, llvm::ConstantAsMetadata::get(b_.getInt32(1))));
        continue;
      }
      const kir::ValueDef& d = k_.values[size_t(st.value)];
      switch (s.lanes[size_t(st.value)]) {
        case kir::Lanes::linear:  // computed where a load or the store uses it
          break;
        case kir::Lanes::uniform:
          lanes_ = 0;
          vals_[size_t(st.value)] = value(d);
          lanes_ = int(lanes);
          break;
        default:
          vals_[size_t(st.value)] = d.op == ScalarOp::load ? vector_load(d, i) : value(d);
      }
    }
    lanes_ = 0;
  });
  loop(s.var, vec_hi, hi, *s.body);
}

// Linear value v (row offset + index) at index i.
llvm::Value* Emitter::linear_index(kir::ValueId v, llvm::Value* i) {
  const kir::ValueDef& d = k_.values[size_t(v)];
  if (d.op == ScalarOp::index) return i;
  const bool first = stream_->lanes[size_t(d.args[0])] == kir::Lanes::linear;
  const kir::ValueId offset = d.args[first ? 1 : 0];
  const kir::ValueDef& o = k_.values[size_t(offset)];
  llvm::Value* off = o.op == ScalarOp::const_  ? b_.getInt64(o.iimm)
                     : o.op == ScalarOp::param ? params_[size_t(o.ref)]
                                               : vals_[size_t(offset)];
  return b_.CreateAdd(linear_index(d.args[first ? 0 : 1], i), off);
}

// Load d (at a linear index) for lanes_ consecutive elements from index i.
llvm::Value* Emitter::vector_load(const kir::ValueDef& d, llvm::Value* i) {
  llvm::Type* t = llvm::FixedVectorType::get(mem_type(d.type), unsigned(lanes_));
  llvm::Value* v =
      b_.CreateAlignedLoad(t, address(d.ref, linear_index(d.args[0], i)), elem_align(d.type));
  return d.type == DType::b8 ? b_.CreateICmpNE(v, llvm::Constant::getNullValue(t)) : v;
}

}  // namespace llvm_emit

bool streams_stores(const kir::Kernel& k, const LlvmEmitOptions& opts) {
  return llvm_emit::streamed_loop(k, opts).has_value();
}

}  // namespace kiln
