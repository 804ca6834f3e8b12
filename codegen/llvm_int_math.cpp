// Integer helpers of the CPU backend's LLVM IR (see llvm_math.h): Philox
// counter-based random bits, bit for bit as the reference kernels, and the
// integer power with wrap-around.
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/ModRef.h>

#include <string>

#include "codegen/llvm_math.h"
#include "ir/error.h"

namespace kiln::llvm_math {

namespace {

// Words 0 and 1 (word 0 high, as an i64) of the Philox-4x32-10 block at counter
// (lo, hi, attempt, 0) of an i64 counter and key (lo, hi) of an i64 key.
llvm::Value* philox_bits(llvm::IRBuilderBase& b, llvm::Value* key, llvm::Value* counter,
                         llvm::Value* attempt) {
  llvm::Type* i32 = b.getInt32Ty();
  llvm::Type* i64 = b.getInt64Ty();
  auto lo = [&](llvm::Value* v) { return b.CreateTrunc(v, i32); };
  auto hi = [&](llvm::Value* v) { return b.CreateTrunc(b.CreateLShr(v, 32), i32); };
  auto k32 = [&](uint32_t v) { return llvm::ConstantInt::get(i32, v); };
  llvm::Value *c0 = lo(counter), *c1 = hi(counter), *c2 = attempt, *c3 = k32(0);
  llvm::Value *k0 = lo(key), *k1 = hi(key);
  for (int r = 0; r < 10; ++r) {
    // 32 x 32 -> 64-bit products: the high word and the low word of each.
    llvm::Value* p0 = b.CreateMul(llvm::ConstantInt::get(i64, 0xD2511F53u), b.CreateZExt(c0, i64));
    llvm::Value* p1 = b.CreateMul(llvm::ConstantInt::get(i64, 0xCD9E8D57u), b.CreateZExt(c2, i64));
    llvm::Value* n0 = b.CreateXor(b.CreateXor(hi(p1), c1), k0);
    llvm::Value* n2 = b.CreateXor(b.CreateXor(hi(p0), c3), k1);
    c0 = n0;
    c1 = lo(p1);
    c2 = n2;
    c3 = lo(p0);
    k0 = b.CreateAdd(k0, k32(0x9E3779B9u));
    k1 = b.CreateAdd(k1, k32(0xBB67AE85u));
  }
  return b.CreateOr(b.CreateShl(b.CreateZExt(c0, i64), 32), b.CreateZExt(c1, i64));
}

// kiln.philox_below(key, counter, bound), defined once per module: attempts
// 0, 1, ... until Lemire's test accepts one (a loop, so it is a function of
// its own rather than straight-line code).
llvm::Function* philox_below_function(llvm::Module& m) {
  const char* name = "kiln.philox_below";
  if (llvm::Function* f = m.getFunction(name)) return f;
  llvm::LLVMContext& ctx = m.getContext();
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type* i128 = llvm::Type::getInt128Ty(ctx);
  auto* f = llvm::Function::Create(llvm::FunctionType::get(i64, {i64, i64, i64}, false),
                                   llvm::Function::InternalLinkage, name, m);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  f->setMemoryEffects(llvm::MemoryEffects::none());
  llvm::Value *key = f->getArg(0), *counter = f->getArg(1), *bound = f->getArg(2);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto* loop = llvm::BasicBlock::Create(ctx, "attempt", f);
  auto* check = llvm::BasicBlock::Create(ctx, "check", f);
  auto* retry = llvm::BasicBlock::Create(ctx, "retry", f);
  auto* done = llvm::BasicBlock::Create(ctx, "done", f);
  llvm::IRBuilder<> b(entry);
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode* attempt = b.CreatePHI(b.getInt32Ty(), 2);
  attempt->addIncoming(b.getInt32(0), entry);
  llvm::Value* x = philox_bits(b, key, counter, attempt);
  llvm::Value* product = b.CreateMul(b.CreateZExt(x, i128), b.CreateZExt(bound, i128));
  llvm::Value* low = b.CreateTrunc(product, i64);
  llvm::Value* high = b.CreateTrunc(b.CreateLShr(product, 64), i64);
  b.CreateCondBr(b.CreateICmpUGE(low, bound), done, check);
  b.SetInsertPoint(check);
  llvm::Value* threshold = b.CreateURem(b.CreateSub(b.getInt64(0), bound), bound);
  b.CreateCondBr(b.CreateICmpUGE(low, threshold), done, retry);
  b.SetInsertPoint(retry);
  attempt->addIncoming(b.CreateAdd(attempt, b.getInt32(1)), retry);
  b.CreateBr(loop);
  b.SetInsertPoint(done);
  b.CreateRet(high);
  return f;
}

}  // namespace

llvm::Value* philox(llvm::IRBuilderBase& b, llvm::Value* key, llvm::Value* counter, DType t) {
  llvm::Value* x = philox_bits(b, key, counter, b.getInt32(0));
  switch (t) {
    case DType::f32:
      return b.CreateFMul(
          b.CreateUIToFP(b.CreateTrunc(b.CreateLShr(x, 40), b.getInt32Ty()), b.getFloatTy()),
          llvm::ConstantFP::get(b.getFloatTy(), 0x1p-24));
    case DType::f64:
      return b.CreateFMul(b.CreateSIToFP(b.CreateLShr(x, 11), b.getDoubleTy()),
                          llvm::ConstantFP::get(b.getDoubleTy(), 0x1p-53));
    case DType::i64:
      return x;
    default:
      throw Error(std::string("CPU backend: no philox draw of type ") + dtype_name(t));
  }
}

llvm::Value* philox_below(llvm::IRBuilderBase& b, llvm::Value* key, llvm::Value* counter,
                          llvm::Value* bound) {
  llvm::Function* f = philox_below_function(*b.GetInsertBlock()->getModule());
  return b.CreateCall(f, {key, counter, bound});
}

llvm::Value* ipow(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y, bool is_unsigned) {
  llvm::Type* t = x->getType();
  const unsigned bits = t->getIntegerBitWidth();
  auto k = [&](int64_t v) { return llvm::ConstantInt::get(t, uint64_t(v), true); };
  llvm::Value* result = k(1);
  llvm::Value* base = x;
  // Every exponent bit of an unsigned type counts; a signed type's top bit is its sign.
  const unsigned used = is_unsigned ? bits : bits - 1;
  for (unsigned i = 0; i < used; ++i) {
    llvm::Value* bit = b.CreateTrunc(b.CreateLShr(y, k(i)), b.getInt1Ty());
    result = b.CreateSelect(bit, b.CreateMul(result, base), result);
    if (i + 1 < used) base = b.CreateMul(base, base);
  }
  if (is_unsigned) return result;
  // Negative exponents: 1 for x = 1, +-1 for x = -1, else 0.
  llvm::Value* odd = b.CreateTrunc(y, b.getInt1Ty());
  llvm::Value* neg_one = b.CreateSelect(odd, k(-1), k(1));
  llvm::Value* negative = b.CreateSelect(b.CreateICmpEQ(x, k(1)), k(1),
                                         b.CreateSelect(b.CreateICmpEQ(x, k(-1)), neg_one, k(0)));
  return b.CreateSelect(b.CreateICmpSLT(y, k(0)), negative, result);
}

}  // namespace kiln::llvm_math
