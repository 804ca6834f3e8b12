// LlvmJit: host target, optimisation pipelines, object/assembly emission and the ORC
// LLJIT that loads kernels (see llvm_jit.h).
#include "runtime/llvm_jit.h"

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <vector>

#include "ir/error.h"
#include "runtime/scope_exit.h"

namespace kiln {

namespace {

std::string error_text(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

template <class T>
T unwrap(llvm::Expected<T> v, const char* what) {
  if (!v) throw Error(std::string("LLVM JIT: ") + what + ": " + error_text(v.takeError()));
  return std::move(*v);
}

// The fast pipeline. Kiln's kernels arrive as clean SSA loop nests (no allocas
// to promote, no calls but the always-inline body and math helpers), so they need
// far less than O3's function simplification pipeline, which runs instcombine
// eight times: inline the body, clean up once, rotate loops and hoist invariant
// loads, canonicalise the induction variables, vectorise, clean up the vector
// code. Half of O3-without-unrolling's time on the MLP step's kernels, and the
// kernels run as fast (bench_compile: BM_KernelSpeed; bench_jit, bench_train).
constexpr const char* kFastPipeline =
    "always-inline,"
    "function("
    "sroa,early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg,"
    "loop-mssa(loop-rotate,licm<allowspeculation>),indvars,"
    "loop-vectorize,"
    "instcombine<no-verify-fixpoint>,"
    "simplifycfg<forward-switch-cond;switch-range-to-icmp;switch-to-lookup;no-keep-loops;"
    "hoist-common-insts;sink-common-insts;speculate-blocks;simplify-cond-branch>,"
    "loop-mssa(licm),early-cse),"
    "globaldce";

// Code generation without loop strength reduction. LSR took a quarter of the
// machine-code time of the MLP step's kernels; Kiln's loops index every buffer
// off one induction variable, which x86 addressing modes already fold, and the
// kernels run no slower without it (the same benchmarks). LLVM has no per-target
// switch for it, only its command-line option, set once for the process.
void disable_loop_strength_reduction() {
  llvm::StringMap<llvm::cl::Option*>& opts = llvm::cl::getRegisteredOptions();
  auto it = opts.find("disable-lsr");
  if (it == opts.end())
    throw Error("LLVM JIT: LLVM " LLVM_VERSION_STRING " has no -disable-lsr option");
  static_cast<llvm::cl::opt<bool>*>(it->second)->setValue(true);
}

}  // namespace

struct LlvmJit::Impl {
  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple()};
  std::string cpu, features, enabled;
  int vector_width = 0;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::mutex mu;        // createJITDylib + addObjectFile + lookup (or removeJITDylib), as one step
  uint64_t dylibs = 0;  // names made so far
  size_t live = 0;      // dylibs not yet removed

  // Removes a JITDylib (and frees its code) under the lock.
  void remove(llvm::orc::JITDylib& jd) {
    std::lock_guard<std::mutex> lock(mu);
    --live;
    if (llvm::Error e = jit->getExecutionSession().removeJITDylib(jd))
      std::fprintf(stderr, "kiln: LLVM JIT: cannot free a kernel's code: %s\n",
                   error_text(std::move(e)).c_str());
  }

  std::unique_ptr<llvm::TargetMachine> new_target_machine() const {
    llvm::orc::JITTargetMachineBuilder b = jtmb;
    return unwrap(b.createTargetMachine(), "cannot create a target machine for the host");
  }

  // Target machines not in use. Making one and its subtarget (the host's
  // features, set one by one with their implications) took longer than
  // optimising a small kernel, and every optimisation and emission made its
  // own; now each is made once and lent to one compile at a time (a
  // TargetMachine is not thread-safe: it caches its subtargets), so a process
  // makes as many as it ever compiles at once. A target machine keeps nothing
  // of one module that changes the code of the next.
  std::mutex tm_mu;
  std::vector<std::unique_ptr<llvm::TargetMachine>> idle_tms;
  size_t tms_made = 0;
  std::string data_layout;  // the host's, as every kernel module gets it

  // A target machine lent for one optimisation or emission.
  class TargetMachineLease {
   public:
    explicit TargetMachineLease(Impl& impl) : impl_(impl) {
      {
        std::lock_guard<std::mutex> lock(impl.tm_mu);
        if (!impl.idle_tms.empty()) {
          tm_ = std::move(impl.idle_tms.back());
          impl.idle_tms.pop_back();
        }
      }
      if (tm_) return;
      tm_ = impl.new_target_machine();
      std::lock_guard<std::mutex> lock(impl.tm_mu);
      ++impl.tms_made;
    }
    ~TargetMachineLease() {
      std::lock_guard<std::mutex> lock(impl_.tm_mu);
      impl_.idle_tms.push_back(std::move(tm_));
    }
    TargetMachineLease(const TargetMachineLease&) = delete;
    TargetMachineLease& operator=(const TargetMachineLease&) = delete;
    llvm::TargetMachine& operator*() const { return *tm_; }
    llvm::TargetMachine* operator->() const { return tm_.get(); }
    llvm::TargetMachine* get() const { return tm_.get(); }

   private:
    Impl& impl_;
    std::unique_ptr<llvm::TargetMachine> tm_;
  };
  TargetMachineLease target_machine() { return TargetMachineLease(*this); }
};

LlvmJit::LlvmJit() : impl_(std::make_unique<Impl>()) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::InitializeNativeTargetAsmParser();
  Impl& I = *impl_;
  I.jtmb = unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "cannot detect the host");
  I.jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  // Sorted, so the cache key does not depend on hash-map order.
  std::vector<std::string> feats = I.jtmb.getFeatures().getFeatures();
  std::sort(feats.begin(), feats.end());
  I.jtmb.getFeatures() = llvm::SubtargetFeatures();
  for (const std::string& f : feats) {
    I.jtmb.getFeatures().AddFeature(f);
    if (!I.features.empty()) I.features += ",";
    I.features += f;
    if (!f.empty() && f[0] == '+') I.enabled += (I.enabled.empty() ? "" : ",") + f;
  }
  I.cpu = I.jtmb.getCPU();
  auto has = [&](const char* f) {
    return std::find(feats.begin(), feats.end(), std::string("+") + f) != feats.end();
  };
  if (has("avx512f") && has("evex512")) I.vector_width = 512;
  I.data_layout = I.target_machine()->createDataLayout().getStringRepresentation();
  disable_loop_strength_reduction();
  // LLJIT only loads objects here (Kiln compiles with its own target machines),
  // so it gets the data layout rather than a target machine to find it, a
  // compiler that would make its target machine only when asked to compile, and
  // no platform: the default one builds an IR module of initialiser functions in
  // a new LLVMContext for every JITDylib (one per kernel), for static
  // constructors that kernels never have.
  I.jit =
      unwrap(llvm::orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(I.jtmb)
                 .setDataLayout(llvm::DataLayout(I.data_layout))
                 .setCompileFunctionCreator(
                     [](llvm::orc::JITTargetMachineBuilder b)
                         -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
                       return std::make_unique<llvm::orc::ConcurrentIRCompiler>(std::move(b));
                     })
                 .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
                 .create(),
             "cannot create the ORC LLJIT");
}

LlvmJit::~LlvmJit() = default;

LlvmJit& LlvmJit::get() {
  static LlvmJit* jit = new LlvmJit();  // never destroyed: kernels may run during exit
  return *jit;
}

const std::string& LlvmJit::cpu_name() const {
  return impl_->cpu;
}

const std::string& LlvmJit::cpu_features() const {
  return impl_->features;
}

int LlvmJit::vector_width() const {
  return impl_->vector_width;
}

std::string LlvmJit::target_description() const {
  const std::string& f = impl_->features;
  auto has = [&](const char* feature) {
    return ("," + f + ",").find(std::string(",+") + feature + ",") != std::string::npos;
  };
  // The widest vector ISA the kernels may use, and the width math kernels get.
  std::string isa = has("avx512f") ? "AVX-512" : has("avx2") ? "AVX2" : has("avx") ? "AVX" : "SSE";
  if (impl_->vector_width)
    isa += ", " + std::to_string(impl_->vector_width) + "-bit vectors";
  else
    isa += has("avx512f") ? ", LLVM's vector width"
           : has("avx")   ? ", 256-bit vectors"
                          : ", 128-bit vectors";
  return impl_->cpu + ", " + isa + " " + impl_->enabled;
}

const char* LlvmJit::llvm_version() {
  return LLVM_VERSION_STRING;
}

void LlvmJit::configure(llvm::Module& m) const {
  m.setTargetTriple(impl_->jtmb.getTargetTriple().str());
  m.setDataLayout(impl_->data_layout);
}

const char* llvm_opt_name(LlvmOpt o) {
  return o == LlvmOpt::Full ? "full" : o == LlvmOpt::None ? "none" : "fast";
}

int64_t host_last_level_cache_bytes() {
  // Linux's figure first: one cache's, shared by cpu0's neighbours. The C
  // library's may be the whole package's (on an 8-CCD EPYC, 256 MiB for eight
  // 32 MiB caches that each serve their own cores).
  for (const char* index : {"index3", "index2"}) {
    std::ifstream f(std::string("/sys/devices/system/cpu/cpu0/cache/") + index + "/size");
    int64_t kib = 0;
    char unit = 0;
    if (f >> kib >> unit && kib > 0 && unit == 'K') return kib << 10;
  }
  for (int level : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE})
    if (const long bytes = sysconf(level); bytes > 0) return bytes;
  return int64_t{32} << 20;
}

const char* code_tier_name(CodeTier t) {
  return t == CodeTier::Quick ? "0" : t == CodeTier::Optimised ? "1" : "tiered";
}

void LlvmJit::optimize(llvm::Module& m, LlvmOpt opt) const {
  if (opt == LlvmOpt::None) return;
  const Impl::TargetMachineLease tm = impl_->target_machine();
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.LoopInterleaving = true;
  pto.SLPVectorization = opt == LlvmOpt::Full;
  pto.LoopUnrolling = opt == LlvmOpt::Full;
  llvm::PassBuilder pb(tm.get(), pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  if (opt == LlvmOpt::Full) {
    mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  } else if (llvm::Error e = pb.parsePassPipeline(mpm, kFastPipeline)) {
    throw Error("LLVM JIT: cannot build the fast pipeline: " + error_text(std::move(e)));
  }
  mpm.run(m, mam);
}

namespace {

// LLVM 19's FastISel (the quick tier's instruction selector) lowers a float or
// double `select` whose condition is a compare of the same type, on an AVX
// machine without AVX-512, to vcmpsd + vblendvpd (vcmpss + vblendvps) on
// 16-byte registers, and then folds the scalar load feeding the select into
// the blend's memory operand: a 16-byte read of a 4- or 8-byte element, past
// the end of a buffer whose last element ends at a page's end (user memory,
// or a large buffer mmap gave whole pages). A select on the values' bits is
// selected as a cmov of 4- or 8-byte values instead, which reads nothing it
// should not and gives the same bits. Only the quick tier's modules are
// rewritten: the optimised code is selected by SelectionDAG, which does not
// widen such a load.
void select_bits_not_floats(llvm::Module& m) {
  for (llvm::Function& f : m)
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& inst : llvm::make_early_inc_range(bb)) {
        auto* s = llvm::dyn_cast<llvm::SelectInst>(&inst);
        if (s == nullptr || !(s->getType()->isFloatTy() || s->getType()->isDoubleTy())) continue;
        llvm::IRBuilder<> b(s);
        llvm::Type* bits = b.getIntNTy(s->getType()->getPrimitiveSizeInBits().getFixedValue());
        llvm::Value* r = b.CreateSelect(s->getCondition(), b.CreateBitCast(s->getTrueValue(), bits),
                                        b.CreateBitCast(s->getFalseValue(), bits));
        s->replaceAllUsesWith(b.CreateBitCast(r, s->getType()));
        s->eraseFromParent();
      }
}

// `quick`: the borrowed target machine emits at -O0 (TargetPassConfig reads the
// level, and at -O0 selects FastISel, which it records in the machine's options
// and leaves there), and is given back as it was lent: at -O3, which the
// optimisation pipeline also reads, and without FastISel.
std::string emit(llvm::TargetMachine& tm, llvm::Module& m, llvm::CodeGenFileType type,
                 bool quick = false) {
  const llvm::CodeGenOptLevel level = tm.getOptLevel();
  const bool fast_isel = tm.Options.EnableFastISel, global_isel = tm.Options.EnableGlobalISel;
  if (quick) {
    tm.setOptLevel(llvm::CodeGenOptLevel::None);
    select_bits_not_floats(m);
  }
  const ScopeExit restore([&] {
    tm.setOptLevel(level);
    tm.setFastISel(fast_isel);
    tm.setGlobalISel(global_isel);
  });
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type))
    throw Error("LLVM JIT: the host target cannot emit this file type");
  pm.run(m);
  return std::string(buf.data(), buf.size());
}

}  // namespace

std::string LlvmJit::emit_object(llvm::Module& m, bool quick) const {
  const Impl::TargetMachineLease tm = impl_->target_machine();
  return emit(*tm, m, llvm::CodeGenFileType::ObjectFile, quick);
}

std::string LlvmJit::emit_assembly(const llvm::Module& m, bool quick) const {
  std::unique_ptr<llvm::Module> clone = llvm::CloneModule(m);
  const Impl::TargetMachineLease tm = impl_->target_machine();
  return emit(*tm, *clone, llvm::CodeGenFileType::AssemblyFile, quick);
}

void* LlvmJit::load_object(std::string_view object, const std::string& symbol,
                           std::shared_ptr<const void>* code) {
  Impl& I = *impl_;
  std::unique_ptr<llvm::MemoryBuffer> buf =
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()), symbol);
  std::unique_lock<std::mutex> lock(I.mu);
  // A dylib per object: the same kernel may be loaded again (a cache entry
  // recompiled, or a second plan) without clashing symbol definitions, and is
  // freed on its own. Each one links against the process (memset/memcpy the
  // optimiser may introduce).
  auto jd_or = I.jit->createJITDylib("kiln_dylib_" + std::to_string(I.dylibs++));
  if (!jd_or) throw Error("LLVM JIT: cannot create a JITDylib: " + error_text(jd_or.takeError()));
  llvm::orc::JITDylib* jd = &*jd_or;
  ++I.live;
  // From here on the dylib is freed on every path out, error or not.
  std::shared_ptr<const void> owner(jd, [&I](const void* p) {
    I.remove(*static_cast<llvm::orc::JITDylib*>(const_cast<void*>(p)));
  });
  auto fail = [&](std::string msg) {
    lock.unlock();
    owner.reset();
    throw Error(std::move(msg));
  };
  if (llvm::Error e = I.jit->addObjectFile(*jd, std::move(buf)))
    fail("LLVM JIT: cannot load the object for " + symbol + ": " + error_text(std::move(e)));
  auto addr = I.jit->lookup(*jd, symbol);
  if (!addr) fail("LLVM JIT: kernel symbol not found: " + error_text(addr.takeError()));
  lock.unlock();
  *code = std::move(owner);
  return addr->toPtr<void*>();
}

size_t LlvmJit::target_machines() const {
  std::lock_guard<std::mutex> lock(impl_->tm_mu);
  return impl_->tms_made;
}

size_t LlvmJit::loaded_objects() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->live;
}

}  // namespace kiln
