// sin and cos of large arguments on the CPU (see llvm_math.h: sin_or_cos,
// define_vector_variants): a module function per op and type whose vector
// variants the loop vectoriser calls, libm's result past the fast path's range.
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/ModRef.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <string>
#include <vector>

#include "codegen/llvm_math.h"
#include "ir/error.h"

namespace kiln::llvm_math {
namespace {

// sin and cos of large arguments. sincos_fast's reduction is exact while n =
// rint(x 2/pi) times its constants is: up to |x| = kTrigFastLimit it keeps
// the accuracy in llvm_math.h, far beyond it the result is garbage (sin(1e20)
// came out as -inf). Past the limit a lane takes libm's sinf/sin (cosf/cos),
// as the reference kernels do. A branch per element would stop the loop
// vectoriser, so sin is a call of kiln.sin.f32 (kiln.cos.f64, ...): a
// function of the module, not inlined, whose vector variants (kiln.sin.f32.v8:
// the same arithmetic in lanes, and one branch per vector to the scalar
// function lane by lane, taken only when some lane is past the limit) the
// vectoriser calls through the "vector-function-abi-variant" attribute.
// define_vector_variants gives the variants it used their bodies and inlines
// them. Scalar and vector paths compute the same bits.
constexpr double kTrigFastLimit = 1e4;

std::string trig_name(bool cos, llvm::Type* scalar) {
  return std::string(cos ? "kiln.cos." : "kiln.sin.") + (scalar->isDoubleTy() ? "f64" : "f32");
}

// The vector widths a variant is declared for: a 128-, 256- and 512-bit vector.
std::vector<unsigned> variant_widths(llvm::Type* scalar) {
  return scalar->isDoubleTy() ? std::vector<unsigned>{2, 4, 8} : std::vector<unsigned>{4, 8, 16};
}

std::string variant_name(const std::string& scalar_fn, unsigned lanes) {
  return scalar_fn + ".v" + std::to_string(lanes);
}

// The caller's target (CPU and features) on f, so that f, its variants and
// the kernel choose the same arithmetic (fuses_multiply_add) and instructions.
void copy_target(llvm::Function& f, const llvm::Function& from) {
  for (const char* a : {"target-cpu", "target-features"})
    if (from.hasFnAttribute(a)) f.addFnAttr(from.getFnAttribute(a));
}

// sin or cos of x: the fast path, or libm's past the limit; x a scalar; for
// kernel, whose target it takes.
llvm::Function* trig_function(llvm::Module& m, llvm::Type* ft, bool cos,
                              const llvm::Function& kernel) {
  const std::string name = trig_name(cos, ft);
  if (llvm::Function* f = m.getFunction(name)) return f;
  llvm::LLVMContext& ctx = m.getContext();
  auto* type = llvm::FunctionType::get(ft, {ft}, false);
  auto* f = llvm::Function::Create(type, llvm::Function::InternalLinkage, name, m);
  copy_target(*f, kernel);
  // libm's sinf/sin set errno only for an infinite argument, which never
  // reaches it (the fast path's NaN is the result), so they read and write no
  // memory here.
  for (llvm::Attribute::AttrKind a :
       {llvm::Attribute::NoUnwind, llvm::Attribute::WillReturn, llvm::Attribute::NoInline})
    f->addFnAttr(a);
  f->setMemoryEffects(llvm::MemoryEffects::none());
  const bool dbl = ft->isDoubleTy();
  llvm::FunctionCallee libm =
      m.getOrInsertFunction(cos ? (dbl ? "cos" : "cosf") : (dbl ? "sin" : "sinf"), type);
  if (auto* lf = llvm::dyn_cast<llvm::Function>(libm.getCallee())) {
    lf->setMemoryEffects(llvm::MemoryEffects::none());
    lf->addFnAttr(llvm::Attribute::NoUnwind);
  }
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto* slow = llvm::BasicBlock::Create(ctx, "libm", f);
  auto* done = llvm::BasicBlock::Create(ctx, "done", f);
  llvm::IRBuilder<> b(entry);
  llvm::Value* x = f->getArg(0);
  llvm::Value* fast = sincos_fast(b, x, cos);
  llvm::Value* a = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  b.CreateCondBr(b.CreateAnd(b.CreateFCmpOGT(a, llvm::ConstantFP::get(ft, kTrigFastLimit)),
                             b.CreateFCmpONE(a, llvm::ConstantFP::getInfinity(ft))),
                 slow, done);
  b.SetInsertPoint(slow);
  llvm::Value* exact = b.CreateCall(libm, {x});
  b.CreateBr(done);
  b.SetInsertPoint(done);
  llvm::PHINode* r = b.CreatePHI(ft, 2);
  r->addIncoming(fast, entry);
  r->addIncoming(exact, slow);
  b.CreateRet(r);

  // The variants, declared; they and f are kept in llvm.compiler.used until
  // define_vector_variants (else a loop vectorised whole leaves f without a call).
  std::string mappings;
  std::vector<llvm::GlobalValue*> declared = {f};
  for (unsigned lanes : variant_widths(ft)) {
    const std::string vname = variant_name(name, lanes);
    auto* vt = llvm::FixedVectorType::get(ft, lanes);
    declared.push_back(llvm::Function::Create(llvm::FunctionType::get(vt, {vt}, false),
                                              llvm::Function::ExternalLinkage, vname, m));
    if (!mappings.empty()) mappings += ",";
    mappings += "_ZGV_LLVM_N" + std::to_string(lanes) + "v_" + name + "(" + vname + ")";
  }
  f->addFnAttr("vector-function-abi-variant", mappings);
  llvm::appendToCompilerUsed(m, declared);
  return f;
}

// f lane by lane on a vector of type vt: kiln.sin.f32.v8.lanes. It preserves
// every register (preserve_allcc), so that the vector loop that calls it, rarely,
// keeps its constants in registers rather than loading them again each
// iteration (a call with the C convention clobbers every vector register):
// sin over 32K floats ran at 0.64 ns an element that way, against 0.42.
llvm::Function* lanes_function(llvm::Function& f, llvm::FixedVectorType* vt) {
  llvm::Module& m = *f.getParent();
  const std::string name = variant_name(f.getName().str(), vt->getNumElements()) + ".lanes";
  if (llvm::Function* g = m.getFunction(name)) return g;
  auto* g = llvm::Function::Create(llvm::FunctionType::get(vt, {vt}, false),
                                   llvm::Function::InternalLinkage, name, m);
  copy_target(*g, f);
  g->setCallingConv(llvm::CallingConv::PreserveAll);
  g->addFnAttr(llvm::Attribute::NoInline);
  g->addFnAttr(llvm::Attribute::NoUnwind);
  g->setMemoryEffects(llvm::MemoryEffects::none());
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(m.getContext(), "entry", g));
  llvm::Value* x = g->getArg(0);
  llvm::Value* r = llvm::PoisonValue::get(vt);
  for (unsigned i = 0; i < vt->getNumElements(); ++i)
    r = b.CreateInsertElement(r, b.CreateCall(&f, {b.CreateExtractElement(x, i)}), i);
  b.CreateRet(r);
  return g;
}

// The body of a variant of scalar function f (kiln.sin.f32.v8 of kiln.sin.f32).
void define_variant(llvm::Function& v, llvm::Function& f, bool cos) {
  llvm::LLVMContext& ctx = v.getContext();
  v.setLinkage(llvm::Function::InternalLinkage);
  copy_target(v, f);
  v.addFnAttr(llvm::Attribute::NoUnwind);
  v.setMemoryEffects(llvm::MemoryEffects::none());
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", &v);
  auto* slow = llvm::BasicBlock::Create(ctx, "lanes", &v);
  auto* done = llvm::BasicBlock::Create(ctx, "done", &v);
  llvm::IRBuilder<> b(entry);
  llvm::Value* x = v.getArg(0);
  llvm::Value* fast = sincos_fast(b, x, cos);
  llvm::Value* big = b.CreateFCmpOGT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                     llvm::ConstantFP::get(x->getType(), kTrigFastLimit));
  // In 512-bit vectors the branch is marked rare: preserve_allcc keeps ymm0-15
  // only, so the call clobbers every zmm register, and without the weights
  // the register allocator kept the loop's constants on the stack, loaded
  // again each iteration (f32 sin for skylake-avx512 and znver4: 49 stack
  // operands in the loop's blocks without the call, 5 with the weights; the
  // spills move around the call). Not in 256-bit vectors: on a Zen 3 the
  // weights made the loop slower (0.45 -> 0.47 ns an element).
  llvm::MDNode* weights = nullptr;
  if (x->getType()->getPrimitiveSizeInBits() >= 512)
    weights = llvm::MDBuilder(ctx).createBranchWeights(1, (1u << 20) - 1);
  b.CreateCondBr(b.CreateOrReduce(big), slow, done, weights);
  b.SetInsertPoint(slow);
  llvm::CallInst* lanes =
      b.CreateCall(lanes_function(f, llvm::cast<llvm::FixedVectorType>(x->getType())), {x});
  lanes->setCallingConv(llvm::CallingConv::PreserveAll);
  b.CreateBr(done);
  b.SetInsertPoint(done);
  llvm::PHINode* r = b.CreatePHI(x->getType(), 2);
  r->addIncoming(fast, entry);
  r->addIncoming(lanes, slow);
  b.CreateRet(r);
}

}  // namespace

llvm::Value* sin_or_cos(llvm::IRBuilderBase& b, llvm::Value* x, bool cos) {
  llvm::Function& kernel = *b.GetInsertBlock()->getParent();
  return b.CreateCall(trig_function(*kernel.getParent(), x->getType(), cos, kernel), {x});
}

void define_vector_variants(llvm::Module& m) {
  std::vector<llvm::Function*> scalars;
  std::vector<std::pair<llvm::Function*, llvm::Function*>> variants;  // (variant, scalar)
  for (bool cos : {false, true})
    for (llvm::Type* t :
         {llvm::Type::getFloatTy(m.getContext()), llvm::Type::getDoubleTy(m.getContext())})
      if (llvm::Function* f = m.getFunction(trig_name(cos, t))) {
        scalars.push_back(f);
        for (unsigned lanes : variant_widths(t))
          if (llvm::Function* v = m.getFunction(variant_name(f->getName().str(), lanes)))
            variants.emplace_back(v, f);
      }
  if (scalars.empty()) return;
  llvm::removeFromUsedLists(m, [&](llvm::Constant* c) {
    for (llvm::Function* f : scalars)
      if (c == f) return true;
    for (auto& [v, f] : variants)
      if (c == v) return true;
    return false;
  });
  for (llvm::Function* f : scalars) f->removeDeadConstantUsers();  // the old used list
  for (auto& [v, f] : variants) {
    v->removeDeadConstantUsers();
    if (!v->use_empty()) {
      define_variant(*v, *f, f->getName().starts_with("kiln.cos"));
      std::vector<llvm::CallBase*> calls;
      for (llvm::User* u : v->users())
        if (auto* call = llvm::dyn_cast<llvm::CallBase>(u)) calls.push_back(call);
      for (llvm::CallBase* call : calls) {
        llvm::InlineFunctionInfo info;
        if (!llvm::InlineFunction(*call, info).isSuccess())
          throw Error("CPU backend: cannot inline " + v->getName().str());
      }
    }
    if (v->use_empty()) v->eraseFromParent();
  }
  for (llvm::Function* f : scalars)
    if (f->use_empty()) f->eraseFromParent();
}

}  // namespace kiln::llvm_math
