// Kernel IR -> LLVM IR with IRBuilder, then O3 and machine code through the
// process-wide LlvmJit (see llvm_codegen.h for the function's shape). The
// Emitter (llvm_emitter.h) is defined here, but for the loop whose output
// streams past the cache (llvm_streamed_pass.cpp).
//
// Loops are plain counted loops (header phi, `slt` test, `nuw nsw` increment);
// accumulators are allocas that SROA turns into phis. Sums are `fadd reassoc`
// so the vectoriser may split them across lanes; max/min reductions use
// llvm.maximum/llvm.minimum, which it also recognises. Elementwise max/min use
// the reference kernels' exact select form. Bools are i1 in registers and one
// byte (0 or 1) in memory.
#include "codegen/llvm_codegen.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <chrono>

#include "codegen/llvm_emitter.h"
#include "codegen/llvm_math.h"
#include "codegen/row_facts.h"
#include "ir/error.h"
#include "runtime/llvm_jit.h"

namespace kiln::llvm_emit {

Emitter::Emitter(const kir::Kernel& k, llvm::Module& m, llvm::IRBuilderBase& b,
                 const LlvmEmitOptions& opts)
    : k_(k), m_(m), ctx_(m.getContext()), b_(b), opts_(opts) {}

void Emitter::counted_loop(const llvm::Twine& name, llvm::Value* lo, llvm::Value* hi,
                           int64_t step, const std::function<void(llvm::Value*)>& emit_body) {
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, name + ".header", f);
  auto* bodybb = llvm::BasicBlock::Create(ctx_, name + ".body", f);
  auto* exit = llvm::BasicBlock::Create(ctx_, name + ".exit", f);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, name);
  i->addIncoming(lo, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(i, hi), bodybb, exit);
  b_.SetInsertPoint(bodybb);
  emit_body(i);
  llvm::Value* next = b_.CreateAdd(i, b_.getInt64(step), "", true, true);
  i->addIncoming(next, b_.GetInsertBlock());
  b_.CreateBr(header);
  b_.SetInsertPoint(exit);
}

void Emitter::emit(const std::string& symbol) {
  const size_t nbuf = k_.buffers.size();
  // A math op that expands into a polynomial (exp, tanh, ...).
  wide_ = LlvmJit::get().vector_width() != 0 && evaluates(k_.body, llvm_math::expands);
  llvm::Type* ptr = b_.getPtrTy();
  llvm::Type* i64 = b_.getInt64Ty();

  // A kernel template's parameter table follows the buffers (kernel_ir.h).
  const bool has_params = !k_.params.empty();
  std::vector<llvm::Type*> params(nbuf, ptr);
  if (has_params) params.push_back(ptr);
  params.push_back(i64);
  params.push_back(i64);
  llvm::Function* body =
      llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), params, false),
                             llvm::GlobalValue::InternalLinkage, symbol + ".body", m_);
  target_attrs(body);
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  for (size_t i = 0; i < nbuf; ++i) {
    const kir::Buffer& buf = k_.buffers[i];
    llvm::Argument* a = body->getArg(unsigned(i));
    a->setName(buf.name);
    if (buf.alias >= 0) continue;  // never dereferenced: stores go through the alias
    a->addAttr(llvm::Attribute::NoAlias);
    a->addAttr(llvm::Attribute::NoCapture);
    a->addAttr(llvm::Attribute::NoUndef);
    bool written = buf.output;
    for (const kir::Buffer& o : k_.buffers) written = written || o.alias == int32_t(i);
    if (!written) a->addAttr(llvm::Attribute::ReadOnly);
    if (opts_.assume_aligned) a->addAttr(llvm::Attribute::getWithAlignment(ctx_, llvm::Align(64)));
    const uint64_t bytes = uint64_t(buf.numel()) * dtype_size(buf.dtype);
    if (bytes > 0 && !buf.sized_at_run_time)
      a->addAttr(llvm::Attribute::getWithDereferenceableBytes(ctx_, bytes));
  }
  for (size_t i = 0; i < nbuf; ++i) bufptr_.push_back(body->getArg(unsigned(i)));
  const unsigned first_scalar = unsigned(nbuf) + (has_params ? 1 : 0);
  llvm::Value* begin = body->getArg(first_scalar);
  llvm::Value* end = body->getArg(first_scalar + 1);
  begin->setName("begin");
  end->setName("end");

  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", body));
  if (has_params) load_params(body->getArg(unsigned(nbuf)));
  for (size_t i = 0; i < k_.tables.size(); ++i) tables_.push_back(make_table(k_.tables[i], i));
  for (const kir::Accumulator& a : k_.accs) {
    acc_val_.push_back(b_.CreateAlloca(reg_type(a.type), nullptr, "acc"));
    acc_pos_.push_back(a.arg() ? b_.CreateAlloca(i64, nullptr, "acc.pos") : nullptr);
  }
  vals_.assign(k_.values.size(), nullptr);
  loopvar_.assign(size_t(k_.num_loops), nullptr);
  plan_row_prefetch();
  stream_ = streamed_loop(k_, opts_);
  if (stream_ && !stream_->stmt)
    streamed_pass(begin, end);
  else
    loop(0, begin, end, k_.body);
  // Streaming stores are weakly ordered: fenced before the pool's join can
  // publish them to the thread that reads the output.
  if (stream_) b_.CreateIntrinsic(llvm::Intrinsic::x86_sse_sfence, {}, {});
  b_.CreateRetVoid();

  // The entry point: read the pointer table, call the body.
  llvm::Function* entry =
      llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64, i64}, false),
                             llvm::GlobalValue::ExternalLinkage, symbol, m_);
  target_attrs(entry);
  entry->getArg(0)->setName("buffers");
  entry->getArg(0)->addAttr(llvm::Attribute::NoCapture);
  entry->getArg(0)->addAttr(llvm::Attribute::ReadOnly);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
  std::vector<llvm::Value*> args;
  for (size_t i = 0; i < nbuf + (has_params ? 1 : 0); ++i) {
    llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(ptr, entry->getArg(0), i);
    args.push_back(b_.CreateAlignedLoad(ptr, slot, llvm::Align(8),
                                        i < nbuf ? k_.buffers[i].name : std::string("params")));
  }
  args.push_back(entry->getArg(1));
  args.push_back(entry->getArg(2));
  b_.CreateCall(body, args);
  b_.CreateRetVoid();
}

void Emitter::target_attrs(llvm::Function* f) {
  const LlvmJit& jit = LlvmJit::get();
  f->addFnAttr("target-cpu", jit.cpu_name());
  f->addFnAttr("target-features", jit.cpu_features());
  // The host's width (LlvmJit::vector_width) for kernels bound by arithmetic:
  // exp and tanh ran a third faster in 512-bit vectors than in LLVM's 256;
  // rounding and sqrt, one instruction each, a tenth slower (in cache).
  if (wide_) f->addFnAttr("prefer-vector-width", std::to_string(jit.vector_width()));
  f->addFnAttr(llvm::Attribute::NoUnwind);
  f->addFnAttr(llvm::Attribute::NoFree);
  f->addFnAttr(llvm::Attribute::NoSync);
  f->addFnAttr(llvm::Attribute::WillReturn);
}

// Reads every run-time parameter once, at entry (they are loop-invariant).
void Emitter::load_params(llvm::Argument* table) {
  table->setName("params");
  table->addAttr(llvm::Attribute::NoAlias);
  table->addAttr(llvm::Attribute::NoCapture);
  table->addAttr(llvm::Attribute::ReadOnly);
  table->addAttr(llvm::Attribute::getWithDereferenceableBytes(ctx_, 8 * k_.params.size()));
  for (size_t i = 0; i < k_.params.size(); ++i) {
    llvm::Type* t = k_.params[i] == DType::f64 ? b_.getDoubleTy() : b_.getInt64Ty();
    llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(t, table, i);
    params_.push_back(b_.CreateAlignedLoad(t, slot, llvm::Align(8), "p" + llvm::Twine(i)));
  }
}

// A parameter as the constant it stands for: f64 rounded to the value's type
// (as ConstantFP::get rounds a const), i64 truncated (as ConstantInt::get does).
llvm::Value* Emitter::param(DType t, int32_t ref) {
  llvm::Value* p = params_[size_t(ref)];
  if (is_floating(t)) return t == DType::f64 ? p : b_.CreateFPTrunc(p, reg_type(t));
  return t == DType::i64 ? p : b_.CreateTrunc(p, reg_type(t));
}

// A value's type: a vector of lanes_ inside a streamed loop's vector body.
llvm::Type* Emitter::reg_type(DType t) {
  llvm::Type* scalar = scalar_type(t);
  return lanes_ ? llvm::FixedVectorType::get(scalar, unsigned(lanes_)) : scalar;
}

llvm::Type* Emitter::scalar_type(DType t) {
  switch (t) {
    case DType::f32:
      return b_.getFloatTy();
    case DType::f64:
      return b_.getDoubleTy();
    case DType::i32:
      return b_.getInt32Ty();
    case DType::i64:
      return b_.getInt64Ty();
    case DType::b8:
      return b_.getInt1Ty();
    case DType::u8:
    case DType::i8:
      return b_.getInt8Ty();
    case DType::i16:
      return b_.getInt16Ty();
  }
  return nullptr;
}

llvm::Type* Emitter::mem_type(DType t) {
  return t == DType::b8 ? b_.getInt8Ty() : scalar_type(t);
}

llvm::Constant* Emitter::constant(DType t, double f, int64_t i) {
  if (is_floating(t)) return llvm::ConstantFP::get(reg_type(t), f);
  return llvm::ConstantInt::get(reg_type(t), uint64_t(i), !is_unsigned(t));
}

llvm::GlobalVariable* Emitter::make_table(const kir::Table& t, size_t idx) {
  std::vector<llvm::Constant*> elems;
  for (int64_t j = 0; j < t.size(); ++j) {
    llvm::Constant* c =
        t.fdata.empty() ? constant(t.dtype, 0, t.idata[j]) : constant(t.dtype, t.fdata[j], 0);
    if (t.dtype == DType::b8) c = llvm::ConstantInt::get(b_.getInt8Ty(), t.idata[j] ? 1 : 0);
    elems.push_back(c);
  }
  auto* ty = llvm::ArrayType::get(mem_type(t.dtype), uint64_t(t.size()));
  auto* g = new llvm::GlobalVariable(m_, ty, true, llvm::GlobalValue::PrivateLinkage,
                                     llvm::ConstantArray::get(ty, elems),
                                     llvm::Twine("table") + llvm::Twine(idx));
  g->setAlignment(llvm::Align(64));
  g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return g;
}

void Emitter::block(const std::vector<kir::Stmt>& body) {
  for (const kir::Stmt& s : body) stmt(s);
}

// A short loop whose length is not a multiple of a vector's lanes (a row of 30
// between a pad's edges) runs as the whole vectors from lo and one more vector
// that ends at hi, overlapping the one before: the vectoriser then leaves no
// scalar remainder, which took most of such a row's time (a 3x3 depthwise
// conv's taps over 32-wide rows cut at the pad's edges: bench_conv). Only where
// running an iteration twice stores the same values again: lets and stores,
// and no load of a buffer the loop stores to.
void Emitter::loop(int32_t var, llvm::Value* lo, llvm::Value* hi,
                   const std::vector<kir::Stmt>& body) {
  auto run = [&](llvm::Value* from, llvm::Value* to) {
    counted_loop("i" + llvm::Twine(var), from, to, 1, [&](llvm::Value* i) {
      loopvar_[size_t(var)] = i;
      block(body);
    });
  };
  if (const int64_t cut = overlap_cut(lo, hi, body); cut > 0) {
    const int64_t lanes = vector_bits() / 32;
    run(lo, b_.CreateAdd(lo, b_.getInt64(cut)));
    run(b_.CreateSub(hi, b_.getInt64(lanes)), hi);
    return;
  }
  run(lo, hi);
}

int64_t Emitter::overlap_cut(llvm::Value* lo, llvm::Value* hi,
                             const std::vector<kir::Stmt>& body) const {
  auto* l = llvm::dyn_cast<llvm::ConstantInt>(lo);
  auto* h = llvm::dyn_cast<llvm::ConstantInt>(hi);
  if (!l || !h) return 0;
  const int64_t n = h->getSExtValue() - l->getSExtValue(), lanes = vector_bits() / 32;
  constexpr int64_t kMaxVectors = 8;  // longer loops: the remainder is a small part
  if (lanes < 2 || n <= lanes || n % lanes == 0 || n > kMaxVectors * lanes) return 0;
  std::vector<int32_t> stored;
  for (const kir::Stmt& st : body) {
    if (st.kind == StmtKind::store) {
      stored.push_back(st.ref);
      stored.push_back(k_.buffers[size_t(st.ref)].alias);
    } else if (st.kind != StmtKind::let) {
      return 0;
    }
  }
  for (const kir::Stmt& st : body) {
    const kir::ValueDef& d = k_.values[size_t(st.value)];
    if (st.kind == StmtKind::let && d.op == ScalarOp::load &&
        std::find(stored.begin(), stored.end(), d.ref) != stored.end())
      return 0;
  }
  return n / lanes * lanes;
}

llvm::Value* Emitter::extent(const kir::Stmt& loop) {
  return loop.extent_param >= 0 ? params_[size_t(loop.extent_param)] : b_.getInt64(loop.extent);
}

void Emitter::plan_row_prefetch() {
  std::vector<const kir::Stmt*> passes;
  for (const kir::Stmt& s : k_.body)
    if (s.kind == StmtKind::loop) passes.push_back(&s);
  if (passes.size() < 2) return;
  const kir::Stmt& first = *passes[0];
  const kir::Stmt* carrier = nullptr;
  for (size_t i = passes.size(); i-- > 1 && !carrier;)
    if (passes[i]->extent == first.extent && passes[i]->extent_param == first.extent_param &&
        evaluates(passes[i]->body, kir::is_float_only))
      carrier = passes[i];
  if (!carrier) return;
  RowPrefetch p;
  int64_t elem = 0;
  for (const kir::Stmt& st : first.body) {
    if (st.kind != StmtKind::let) continue;
    const kir::ValueDef& d = k_.values[size_t(st.value)];
    if (d.op != ScalarOp::load) continue;
    const kir::ValueId offset = row_offset(d.args[0], first.ref);
    const int64_t size = dtype_size(k_.buffers[size_t(d.ref)].dtype);
    if (offset == kir::kNoValue || (elem != 0 && size != elem)) continue;
    elem = size;
    p.loads.emplace_back(d.ref, offset);
  }
  if (p.loads.empty()) return;
  if (first.extent_param < 0 && first.extent * elem < kMinRowBytes) return;
  p.elem_bytes = elem;
  p.carrier = carrier;
  prefetch_ = std::move(p);
}

// X when `index` is X + index(var) (either order) with X free of `var` and made
// of row-offset arithmetic over i0; else kNoValue.
kir::ValueId Emitter::row_offset(kir::ValueId index, int32_t var) {
  const kir::ValueDef& d = k_.values[size_t(index)];
  if (d.op != ScalarOp::add) return kir::kNoValue;
  auto is_var = [&](kir::ValueId v) {
    const kir::ValueDef& a = k_.values[size_t(v)];
    return a.op == ScalarOp::index && a.ref == var;
  };
  for (int i = 0; i < 2; ++i)
    if (is_var(d.args[size_t(i)]) && kir::is_row_offset(k_, d.args[size_t(1 - i)]))
      return d.args[size_t(1 - i)];
  return kir::kNoValue;
}

// The row offset `v` at the next outer iteration (i0 + 1), emitted afresh.
llvm::Value* Emitter::next_row_offset(kir::ValueId v) {
  const kir::ValueDef& d = k_.values[size_t(v)];
  switch (d.op) {
    case ScalarOp::const_:
      return b_.getInt64(d.iimm);
    case ScalarOp::param:
      return params_[size_t(d.ref)];
    case ScalarOp::index:
      return b_.CreateAdd(loopvar_[0], b_.getInt64(1));
    case ScalarOp::add:
      return b_.CreateAdd(next_row_offset(d.args[0]), next_row_offset(d.args[1]));
    case ScalarOp::sub:
      return b_.CreateSub(next_row_offset(d.args[0]), next_row_offset(d.args[1]));
    default:  // mul; is_row_offset admitted nothing else
      return b_.CreateMul(next_row_offset(d.args[0]), next_row_offset(d.args[1]));
  }
}

// The second pass in blocks of kBlockLines lines' elements, each block first
// prefetching (for reading, into every cache level) the next row's lines of
// each load of the first pass. Plain GEPs: past the last row the addresses
// leave the buffer, which a prefetch may do.
void Emitter::prefetching_loop(const kir::Stmt& s) {
  const int64_t elem = prefetch_.elem_bytes, block_elems = kBlockLines * kLineBytes / elem;
  std::vector<llvm::Value*> next;
  for (const auto& [buffer, offset] : prefetch_.loads)
    next.push_back(b_.CreateGEP(mem_type(k_.buffers[size_t(buffer)].dtype), base_pointer(buffer),
                                next_row_offset(offset)));
  llvm::Value* hi = extent(s);
  counted_loop("prefetch", b_.getInt64(0), hi, block_elems, [&](llvm::Value* block) {
    for (llvm::Value* base : next) {
      llvm::Value* first =
          b_.CreateGEP(b_.getInt8Ty(), base, b_.CreateMul(block, b_.getInt64(elem)));
      for (int64_t line = 0; line < kBlockLines; ++line) {
        llvm::Value* p = b_.CreateGEP(b_.getInt8Ty(), first, b_.getInt64(line * kLineBytes));
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                           {p, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
      }
    }
    llvm::Value* end = b_.CreateAdd(block, b_.getInt64(block_elems), "", true, true);
    pass(s, block, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, end, hi));
  });
}

// Inner loop s over [lo, hi): streamed when it is the streamed loop.
void Emitter::pass(const kir::Stmt& s, llvm::Value* lo, llvm::Value* hi) {
  if (stream_ && stream_->stmt == &s)
    streamed_pass(lo, hi);
  else
    loop(s.ref, lo, hi, s.body);
}

// Value a as an operand: splat across the lanes when a vector body uses a scalar.
llvm::Value* Emitter::operand(kir::ValueId a) {
  llvm::Value* v = vals_[size_t(a)];
  if (lanes_ && !v->getType()->isVectorTy()) return b_.CreateVectorSplat(unsigned(lanes_), v);
  return v;
}

// A buffer's pointer: its alias's, when it has one (stores in place go through it).
llvm::Value* Emitter::base_pointer(int32_t buffer) {
  const kir::Buffer& buf = k_.buffers[size_t(buffer)];
  return bufptr_[size_t(buf.alias >= 0 ? buf.alias : buffer)];
}

llvm::Value* Emitter::address(int32_t buffer, llvm::Value* idx) {
  return b_.CreateInBoundsGEP(mem_type(k_.buffers[size_t(buffer)].dtype), base_pointer(buffer),
                              idx);
}

llvm::Align Emitter::elem_align(DType t) {
  return llvm::Align(dtype_size(t));
}

void Emitter::stmt(const kir::Stmt& s) {
  switch (s.kind) {
    case StmtKind::let:
      vals_[size_t(s.value)] = value(k_.values[size_t(s.value)]);
      break;
    case StmtKind::store: {
      const DType t = k_.buffers[size_t(s.ref)].dtype;
      llvm::Value* v = vals_[size_t(s.value)];
      if (t == DType::b8) v = b_.CreateZExt(v, b_.getInt8Ty());
      b_.CreateAlignedStore(v, address(s.ref, vals_[size_t(s.index)]), elem_align(t));
      break;
    }
    case StmtKind::loop:
      if (&s == prefetch_.carrier) {
        prefetching_loop(s);
        break;
      }
      pass(s, b_.getInt64(0), extent(s));
      break;
    case StmtKind::if_: {
      llvm::Function* f = b_.GetInsertBlock()->getParent();
      auto* then = llvm::BasicBlock::Create(ctx_, "then", f);
      auto* merge = llvm::BasicBlock::Create(ctx_, "endif", f);
      b_.CreateCondBr(vals_[size_t(s.value)], then, merge);
      b_.SetInsertPoint(then);
      block(s.body);
      b_.CreateBr(merge);
      b_.SetInsertPoint(merge);
      break;
    }
    case StmtKind::acc_init: {
      const kir::Accumulator& a = k_.accs[size_t(s.ref)];
      b_.CreateStore(acc_init_value(a), acc_val_[size_t(s.ref)]);
      if (acc_pos_[size_t(s.ref)]) b_.CreateStore(b_.getInt64(0), acc_pos_[size_t(s.ref)]);
      break;
    }
    case StmtKind::acc_update:
      acc_update(s);
      break;
  }
}

llvm::Value* Emitter::acc_init_value(const kir::Accumulator& a) {
  const kir::Immediate v = kir::identity_of(a.op, a.type);
  return constant(a.type, v.f, v.i);
}

// Folds an element into a reduction's accumulator with the reduction's
// combine op (ops.def), the same scalar code an elementwise op gets; a sum
// may be reassociated (so loops vectorize), a scan's (ordered) may not. An
// argreduce keeps the position of the first element its combine keeps (a NaN
// wins and stays).
void Emitter::acc_update(const kir::Stmt& s) {
  const kir::Accumulator& a = k_.accs[size_t(s.ref)];
  llvm::AllocaInst* slot = acc_val_[size_t(s.ref)];
  llvm::Value* acc = b_.CreateLoad(reg_type(a.type), slot);
  llvm::Value* x = vals_[size_t(s.value)];
  const ScalarOp combine = kir::combine_of(a.op);
  if (!a.arg()) {
    llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
    llvm::FastMathFlags fmf;
    fmf.setAllowReassoc(!a.ordered);
    // Which zero a max or min keeps is unspecified (binary's max, min): without
    // the order of -0 and +0, a vector max is vmaxps, a check for NaN and a
    // blend (x86), not five operations.
    fmf.setNoSignedZeros(combine == ScalarOp::max || combine == ScalarOp::min);
    b_.setFastMathFlags(fmf);
    b_.CreateStore(binary(combine, acc, x, a.type), slot);
    return;
  }
  llvm::Value* better =
      compare(combine == ScalarOp::max ? ScalarOp::gt : ScalarOp::lt, x, acc, a.type);
  if (is_floating(a.type))
    better = b_.CreateOr(better, b_.CreateAnd(b_.CreateFCmpUNO(x, x), b_.CreateFCmpORD(acc, acc)));
  llvm::AllocaInst* pos = acc_pos_[size_t(s.ref)];
  llvm::Value* p = b_.CreateLoad(b_.getInt64Ty(), pos);
  b_.CreateStore(b_.CreateSelect(better, vals_[size_t(s.index)], p), pos);
  b_.CreateStore(b_.CreateSelect(better, x, acc), slot);
}

llvm::Value* Emitter::cast(llvm::Value* x, DType from, DType to) {
  if (from == to) return x;
  llvm::Type* t = reg_type(to);
  if (to == DType::b8) {
    return is_floating(from) ? b_.CreateFCmpUNE(x, llvm::ConstantFP::get(x->getType(), 0.0))
                             : b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
  }
  if (from == DType::b8) return is_floating(to) ? b_.CreateUIToFP(x, t) : b_.CreateZExt(x, t);
  if (is_floating(from) && is_floating(to)) return b_.CreateFPCast(x, t);
  if (is_floating(to)) return from == DType::u8 ? b_.CreateUIToFP(x, t) : b_.CreateSIToFP(x, t);
  // A float becomes a small integer through int64, wrapping (runtime/strided_loop.h: convert).
  if (is_floating(from))
    return dtype_size(to) < 4 ? b_.CreateTrunc(b_.CreateFPToSI(x, reg_type(DType::i64)), t)
                              : b_.CreateFPToSI(x, t);
  return from == DType::u8 ? b_.CreateZExtOrTrunc(x, t) : b_.CreateSExtOrTrunc(x, t);
}

llvm::Value* Emitter::value(const kir::ValueDef& d) {
  const DType t = d.type;
  const bool fp = is_floating(t), boolean = t == DType::b8;
  auto arg = [&](int i) { return operand(d.args[i]); };
  auto arg_type = [&](int i) { return k_.values[size_t(d.args[i])].type; };
  llvm::Type* ty = reg_type(t);
  switch (d.op) {
    case ScalarOp::const_:
      return constant(t, d.fimm, d.iimm);
    case ScalarOp::param:
      return param(t, d.ref);
    case ScalarOp::index:
      return loopvar_[size_t(d.ref)];
    case ScalarOp::load: {
      llvm::Value* v = b_.CreateAlignedLoad(mem_type(t), address(d.ref, arg(0)), elem_align(t));
      return boolean ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
    }
    case ScalarOp::table: {
      llvm::GlobalVariable* g = tables_[size_t(d.ref)];
      llvm::Value* p = b_.CreateInBoundsGEP(g->getValueType(), g, {b_.getInt64(0), arg(0)});
      llvm::Value* v = b_.CreateAlignedLoad(mem_type(t), p, elem_align(t));
      return boolean ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
    }
    case ScalarOp::acc: {
      const kir::Accumulator& a = k_.accs[size_t(d.ref)];
      if (a.arg()) return b_.CreateLoad(b_.getInt64Ty(), acc_pos_[size_t(d.ref)]);
      return b_.CreateLoad(ty, acc_val_[size_t(d.ref)]);
    }
    case ScalarOp::cast:
      return cast(arg(0), arg_type(0), t);
    case ScalarOp::select:
      return b_.CreateSelect(arg(0), arg(1), arg(2));
    case ScalarOp::neg:
      return fp ? b_.CreateFNeg(arg(0)) : boolean ? arg(0) : b_.CreateNeg(arg(0));
    case ScalarOp::abs:
      if (fp) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, arg(0));
      if (boolean || t == DType::u8) return arg(0);
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, arg(0), b_.getFalse());
    case ScalarOp::sign: {
      if (boolean) return arg(0);
      llvm::Value* x = arg(0);
      llvm::Value* zero = llvm::Constant::getNullValue(ty);
      if (fp) {
        llvm::Value* r =
            b_.CreateSelect(b_.CreateFCmpOLT(x, zero), llvm::ConstantFP::get(ty, -1.0), zero);
        return b_.CreateSelect(b_.CreateFCmpOGT(x, zero), llvm::ConstantFP::get(ty, 1.0), r);
      }
      if (t == DType::u8) return b_.CreateZExt(b_.CreateICmpNE(x, zero), ty);
      return b_.CreateSub(b_.CreateZExt(b_.CreateICmpSGT(x, zero), ty),
                          b_.CreateZExt(b_.CreateICmpSLT(x, zero), ty));
    }
    case ScalarOp::relu: {
      llvm::Value* x = arg(0);
      if (boolean || t == DType::u8) return x;
      llvm::Value* zero = llvm::Constant::getNullValue(ty);
      if (fp) return b_.CreateSelect(b_.CreateFCmpOLT(x, zero), zero, x);
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, zero);
    }
    case ScalarOp::not_:
      return b_.CreateNot(arg(0));
    case ScalarOp::div:
      // By a row's value made of finished reductions (softmax's sum, layer norm's
      // sqrt(var + eps)): times its reciprocal, which LICM computes once per row
      // instead of a division per element (within an ulp and a half of the
      // quotient, as PyTorch's softmax does).
      if (fp && kir::row_invariant(k_, d.args[1]))
        return b_.CreateFMul(arg(0), b_.CreateFDiv(llvm::ConstantFP::get(ty, 1.0), arg(1)));
      return binary(d.op, arg(0), arg(1), t);
    case ScalarOp::add:
    case ScalarOp::sub:
    case ScalarOp::mul:
    case ScalarOp::pow:
    case ScalarOp::fmod:
    case ScalarOp::remainder:
    case ScalarOp::max:
    case ScalarOp::min:
      return binary(d.op, arg(0), arg(1), t);
    case ScalarOp::eq:
    case ScalarOp::ne:
    case ScalarOp::lt:
    case ScalarOp::le:
    case ScalarOp::gt:
    case ScalarOp::ge:
      return compare(d.op, arg(0), arg(1), arg_type(0));
    case ScalarOp::and_:
      return b_.CreateAnd(arg(0), arg(1));
    case ScalarOp::or_:
      return b_.CreateOr(arg(0), arg(1));
    case ScalarOp::idiv:
      return b_.CreateUDiv(arg(0), arg(1));
    case ScalarOp::imod:
      return b_.CreateURem(arg(0), arg(1));
    case ScalarOp::philox:
      return llvm_math::philox(b_, arg(0), arg(1), t);
    case ScalarOp::philox_below:
      return llvm_math::philox_below(b_, arg(0), arg(1), arg(2));
#define KILN_LLVM_MATH_CASE(k, name) case ScalarOp::k:
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, cost, scalar, ...) \
  KILN_SCALAR_MATH(KILN_LLVM_MATH_CASE, name, scalar)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_LLVM_MATH_CASE
      // The table's math ops: llvm_math.cpp's scalar math, of one operand or two.
      if (d.op == ScalarOp::exp && kir::below_row_max(k_, d.args[0]))
        return llvm_math::exp_nonpositive(b_, arg(0));
      return llvm_math::math(b_, d.op, arg(0), kir::scalar_op_arity(d.op) == 2 ? arg(1) : nullptr);
  }
  throw Error(std::string("CPU backend: no lowering for kernel IR op ") +
              std::string(kir::scalar_op_name(d.op)));
}

llvm::Value* Emitter::div(llvm::Value* a, llvm::Value* c, DType t) {
  if (is_floating(t)) return b_.CreateFDiv(a, c);
  if (t == DType::b8) return b_.CreateAnd(a, c);
  // x / 0 = 0 and x / -1 = -x (wrapping) without trapping; else truncating division.
  llvm::Type* ty = a->getType();
  llvm::Value* zero = llvm::ConstantInt::get(ty, 0);
  if (t == DType::u8) {  // no -1 to guard against
    llvm::Value* is0 = b_.CreateICmpEQ(c, zero);
    llvm::Value* q = b_.CreateUDiv(a, b_.CreateSelect(is0, llvm::ConstantInt::get(ty, 1), c));
    return b_.CreateSelect(is0, zero, q);
  }
  llvm::Value* m1 = llvm::ConstantInt::get(ty, uint64_t(-1), true);
  llvm::Value* is0 = b_.CreateICmpEQ(c, zero);
  llvm::Value* ism1 = b_.CreateICmpEQ(c, m1);
  llvm::Value* safe = b_.CreateSelect(b_.CreateOr(is0, ism1), llvm::ConstantInt::get(ty, 1), c);
  llvm::Value* q = b_.CreateSDiv(a, safe);
  q = b_.CreateSelect(ism1, b_.CreateNeg(a), q);
  return b_.CreateSelect(is0, zero, q);
}

// The table's binary arith ops on operands of type t (kernel_ir.h's semantics),
// for elementwise values and for reductions' accumulators alike, and the binary
// math ops as combines.
llvm::Value* Emitter::binary(ScalarOp op, llvm::Value* a, llvm::Value* c, DType t) {
  const bool fp = is_floating(t), boolean = t == DType::b8;
  switch (op) {
    case ScalarOp::add:
      return fp ? b_.CreateFAdd(a, c) : boolean ? b_.CreateOr(a, c) : b_.CreateAdd(a, c);
    case ScalarOp::sub:
      return fp ? b_.CreateFSub(a, c) : boolean ? b_.CreateXor(a, c) : b_.CreateSub(a, c);
    case ScalarOp::mul:
      return fp ? b_.CreateFMul(a, c) : boolean ? b_.CreateAnd(a, c) : b_.CreateMul(a, c);
    case ScalarOp::div:
      return div(a, c, t);
    case ScalarOp::pow:
      if (fp) return llvm_math::pow(b_, a, c);
      if (boolean) return b_.CreateOr(a, b_.CreateNot(c));
      return llvm_math::ipow(b_, a, c, t == DType::u8);
    case ScalarOp::fmod:
    case ScalarOp::remainder:
      return modulo(a, c, t, op == ScalarOp::remainder);
    case ScalarOp::max:
    case ScalarOp::min: {
      const bool up = op == ScalarOp::max;
      // NaN-propagating (llvm.maximum/minimum; which zero of +-0 wins is unspecified).
      if (fp)
        return b_.CreateBinaryIntrinsic(up ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, a,
                                        c);
      if (boolean) return up ? b_.CreateOr(a, c) : b_.CreateAnd(a, c);
      if (t == DType::u8)
        return b_.CreateBinaryIntrinsic(up ? llvm::Intrinsic::umax : llvm::Intrinsic::umin, a, c);
      return b_.CreateBinaryIntrinsic(up ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, a, c);
    }
    default:
      // A binary math op (a scan's combine: logaddexp): llvm_math.cpp's.
      if (kir::is_float_only(op) && kir::scalar_op_arity(op) == 2 && fp)
        return llvm_math::math(b_, op, a, c);
      throw Error(std::string("CPU backend: ") + std::string(kir::scalar_op_name(op)) +
                  " is not a binary arith op");
  }
}

// fmod (the sign of a) or, with `floor`, remainder (the sign of c), as the
// reference kernels: integers by srem with x % 0 = x % -1 = 0, never trapping.
llvm::Value* Emitter::modulo(llvm::Value* a, llvm::Value* c, DType t, bool floor) {
  if (t == DType::b8) return llvm::ConstantInt::getFalse(a->getType());
  llvm::Type* ty = a->getType();
  llvm::Value* zero = llvm::Constant::getNullValue(ty);
  llvm::Value* r;
  llvm::Value *nonzero, *r_negative, *c_negative;
  if (is_floating(t)) {
    r = b_.CreateFRem(a, c);
    if (!floor) return r;
    nonzero = b_.CreateFCmpONE(r, zero);
    r_negative = b_.CreateFCmpOLT(r, zero);
    c_negative = b_.CreateFCmpOLT(c, zero);
    return b_.CreateSelect(b_.CreateAnd(nonzero, b_.CreateXor(r_negative, c_negative)),
                           b_.CreateFAdd(r, c), r);
  }
  if (t == DType::u8) {  // both operands >= 0: fmod and remainder agree
    llvm::Value* is0 = b_.CreateICmpEQ(c, zero);
    return b_.CreateSelect(
        is0, zero, b_.CreateURem(a, b_.CreateSelect(is0, llvm::ConstantInt::get(ty, 1), c)));
  }
  llvm::Value* m1 = llvm::ConstantInt::get(ty, uint64_t(-1), true);
  llvm::Value* trivial = b_.CreateOr(b_.CreateICmpEQ(c, zero), b_.CreateICmpEQ(c, m1));
  llvm::Value* safe = b_.CreateSelect(trivial, llvm::ConstantInt::get(ty, 1), c);
  r = b_.CreateSelect(trivial, zero, b_.CreateSRem(a, safe));
  if (!floor) return r;
  nonzero = b_.CreateICmpNE(r, zero);
  llvm::Value* signs_differ = b_.CreateICmpSLT(b_.CreateXor(r, c), zero);
  return b_.CreateSelect(b_.CreateAnd(nonzero, signs_differ), b_.CreateAdd(r, c), r);
}

llvm::Value* Emitter::compare(ScalarOp op, llvm::Value* a, llvm::Value* c, DType t) {
  using P = llvm::CmpInst::Predicate;
  P p;
  if (is_floating(t)) {
    p = op == ScalarOp::eq   ? P::FCMP_OEQ
        : op == ScalarOp::ne ? P::FCMP_UNE
        : op == ScalarOp::lt ? P::FCMP_OLT
        : op == ScalarOp::le ? P::FCMP_OLE
        : op == ScalarOp::gt ? P::FCMP_OGT
                             : P::FCMP_OGE;
    return b_.CreateFCmp(p, a, c);
  }
  // bool: true (1) > false (0), which i1's signed view would invert; uint8: unsigned.
  const bool u = is_unsigned(t);
  p = op == ScalarOp::eq   ? P::ICMP_EQ
      : op == ScalarOp::ne ? P::ICMP_NE
      : op == ScalarOp::lt ? (u ? P::ICMP_ULT : P::ICMP_SLT)
      : op == ScalarOp::le ? (u ? P::ICMP_ULE : P::ICMP_SLE)
      : op == ScalarOp::gt ? (u ? P::ICMP_UGT : P::ICMP_SGT)
                           : (u ? P::ICMP_UGE : P::ICMP_SGE);
  return b_.CreateICmp(p, a, c);
}

}  // namespace kiln::llvm_emit

namespace kiln {
namespace {

std::string module_text(const llvm::Module& m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os, nullptr);
  return os.str();
}

}  // namespace

bool reorders_sums(const kir::Kernel& k) {
  for (const kir::Accumulator& a : k.accs)
    if (is_floating(a.type) && !a.arg() && !a.ordered) return true;
  return false;
}

LlvmKernelBinary compile_kernel_llvm(const kir::Kernel& k, const std::string& symbol,
                                     const LlvmEmitOptions& opts) {
  LlvmJit& jit = LlvmJit::get();
  LlvmKernelBinary out;
  auto t = std::chrono::steady_clock::now();
  auto lap = [&t] {
    auto now = std::chrono::steady_clock::now();
    double ms = std::chrono::duration<double, std::milli>(now - t).count();
    t = now;
    return ms;
  };
  llvm::LLVMContext ctx;
  auto m = std::make_unique<llvm::Module>(symbol, ctx);
  jit.configure(*m);
  llvm::IRBuilder<> builder(ctx);
  llvm_emit::Emitter(k, *m, builder, opts).emit(symbol);
  std::string problems;
  llvm::raw_string_ostream err(problems);
  if (llvm::verifyModule(*m, &err))
    throw Error("CPU backend produced invalid LLVM IR for " + k.name + ": " + err.str());
  if (opts.want_texts) out.llvm_ir = module_text(*m);
  out.irgen_ms = lap();
  jit.optimize(*m, opts.quick && !reorders_sums(k) ? LlvmOpt::None : opts.opt);
  llvm_math::define_vector_variants(*m);
  if (llvm::verifyModule(*m, &err))
    throw Error("CPU backend produced invalid LLVM IR for " + k.name +
                " after defining sin's and cos's vector variants: " + err.str());
  out.optimize_ms = lap();
  if (opts.want_texts) {
    out.llvm_ir_opt = module_text(*m);
    out.assembly = jit.emit_assembly(*m, opts.quick);
  }
  if (opts.want_object) out.object = jit.emit_object(*m, opts.quick);
  out.machine_code_ms = lap();
  return out;
}

}  // namespace kiln
