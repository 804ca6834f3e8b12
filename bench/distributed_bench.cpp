// Data parallelism on MPI (run it under mpirun; rank 0 reports):
//   mpirun -np 2 build/bench/bench_distributed
// - all_reduce of 1, 4 and 16 MB of f32: Kiln (its communication thread, the
//   arrival check, packing) against MPI_Allreduce alone on the same buffer;
// - a traced MLP training step (784-256-10, Adam, global batch 128): one process
//   on the whole batch against DistributedDataParallel with the batch split over
//   the ranks, each rank on one thread, with and without overlap of the gradient
//   all-reduces (KILN_OVERLAP's switch); counters give the communication time per
//   step and the share of it the overlap hides.
// Every rank runs every benchmark the same fixed number of iterations, as
// collectives need.
#include <benchmark/benchmark.h>

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <kiln/kiln.h>

#include "bench/steady_code.h"
#include "frontend/settings.h"
#include "runtime/blas.h"
#include "runtime/collective.h"
#include "runtime/thread_pool.h"

using namespace kiln;
namespace dist = kiln::distributed;

namespace {

constexpr int kCommIters = 40, kStepIters = 30;

void BM_AllReduce(benchmark::State& state) {
  const bool raw = state.range(1) == 1;
  const int64_t n = state.range(0) * (1 << 20) / 4;
  Tensor t = full({n}, 1.f);
  std::vector<float> buf(static_cast<size_t>(n), 1.f);
  auto once = [&] {
    if (raw)
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else
      dist::all_reduce(t);
  };
  once();
  for (auto _ : state) once();
  state.SetBytesProcessed(state.iterations() * n * 4);
  state.SetLabel(std::string(raw ? "MPI_Allreduce alone" : "kiln all_reduce") + ", " +
                 std::to_string(dist::world_size()) + " ranks");
}
BENCHMARK(BM_AllReduce)
    ->ArgsProduct({{1, 4, 16}, {0, 1}})
    ->ArgNames({"MB", "raw_mpi"})
    ->Iterations(kCommIters)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// mode 0: one process, whole batch; 1: data parallel, overlapped; 2: data parallel, no overlap.
void BM_MlpStep(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const int world = dist::world_size(), rank = dist::rank();
  const int64_t global = 128, local = mode == 0 ? global : global / world;
  manual_seed(0);
  Tensor x = randn({global, 784}), labels = (rand({global}) * 10).to(kInt64);
  if (mode != 0) {
    x = x.narrow(0, rank * local, local).contiguous();
    labels = labels.narrow(0, rank * local, local).contiguous();
  }
  nn::Sequential model(nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10));
  optim::Adam opt(model->parameters(), 1e-3);
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  dist::DDPOptions o;
  o.bucket_cap_mb = 0.25;  // several buckets for a 0.8 MB model
  if (mode != 0) ddp = std::make_unique<dist::DistributedDataParallel>(model, o);
  settings().overlap = mode != 2;
  auto step = jit([&](Tensor in, Tensor target) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model(in), target);
    loss.backward();
    opt.step();
    return loss;
  }, "mlp_step");
  for (int i = 0; i < 3; ++i) step(x, labels);  // trace and compile
  const collectives::Stats before = collectives::stats();
  for (auto _ : state) benchmark::DoNotOptimize(step(x, labels).impl());
  const collectives::Stats after = collectives::stats();
  settings().overlap = true;
  state.counters["comm_ms_per_step"] = (after.busy_ms - before.busy_ms) / state.iterations();
  state.counters["collectives_per_step"] =
      static_cast<double>(after.calls - before.calls) / static_cast<double>(state.iterations());
  const char* names[] = {"one process, whole batch", "data parallel, overlapped",
                         "data parallel, no overlap"};
  state.SetLabel(std::string(names[mode]) + ", " + std::to_string(world) + " ranks x " +
                 std::to_string(num_threads()) + " thread");
}
BENCHMARK(BM_MlpStep)->Arg(0)->Arg(1)->Arg(2)->Iterations(kStepIters)->Unit(benchmark::kMillisecond)->UseRealTime();

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "bench_distributed: this MPI gives no MPI_THREAD_MULTIPLE\n");
    return 1;
  }
  dist::InitOptions opts;
  opts.backend = "mpi";
  dist::init(opts);
  set_num_threads(1);  // one core per rank: 2 ranks on this 2-core machine
  bench::time_steady_code();
  benchmark::Initialize(&argc, argv);
  if (dist::rank() == 0) {
    std::printf("kiln distributed: %d ranks (%s); CPU kernels: %s\n", dist::world_size(),
                dist::backend().c_str(), blas_info().c_str());
    benchmark::RunSpecifiedBenchmarks();
  } else {
    NullReporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  dist::finalize();
  MPI_Finalize();
  return 0;
}
