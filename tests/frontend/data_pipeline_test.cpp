// kiln::data's libtorch-shaped pipeline (frontend/data_pipeline.h): datasets,
// map and transforms, the samplers against libtorch's rules, the MNIST reader
// and its errors, and loaders with and without worker threads (order, drop_last,
// a new pass, an error raised in a worker, parallel work).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <thread>

#include "frontend/data_pipeline.h"
#include "test_util.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;
using namespace kiln::data;

// Example i: data [2] = {i, -i}, target i.
struct Numbers : datasets::Dataset<Numbers> {
  explicit Numbers(size_t n, int throw_at = -1, int sleep_ms = 0)
      : n(n), throw_at(throw_at), sleep_ms(sleep_ms) {}
  Example<> get(size_t i) override {
    if (static_cast<int>(i) == throw_at) throw Error("example " + std::to_string(i) + " is broken");
    if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    const double v = static_cast<double>(i);
    return {tensor({v, -v}), tensor(static_cast<long long>(i))};
  }
  std::optional<size_t> size() const override { return n; }
  size_t n;
  int throw_at, sleep_ms;
};

std::vector<int64_t> targets_of(const Example<>& batch) {
  return batch.target.to_vector<int64_t>();
}

template <class Loader>
std::vector<std::vector<int64_t>> all_batches(Loader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& batch : loader) out.push_back(targets_of(batch));
  return out;
}

std::string idx_dir() {
  fs::path d = fs::temp_directory_path() / ("kiln_idx_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d.string();
}

std::string be32(uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 255), char((v >> 8) & 255), char(v & 255)};
}

void write_idx(const std::string& dir, const std::string& prefix, int n, int rows, int cols) {
  std::string images = be32(0x803) + be32(n) + be32(rows) + be32(cols);
  for (int i = 0; i < n * rows * cols; ++i) images += char(i % 256);
  std::string labels = be32(0x801) + be32(n);
  for (int i = 0; i < n; ++i) labels += char(i % 10);
  std::ofstream(dir + "/" + prefix + "-images-idx3-ubyte", std::ios::binary) << images;
  std::ofstream(dir + "/" + prefix + "-labels-idx1-ubyte", std::ios::binary) << labels;
}

TEST_CASE("map and Stack collate examples; Normalize and Lambda transform them") {
  auto ds = Numbers(5)
                .map(transforms::Lambda<Example<>>([](Example<> e) {
                  e.data = e.data * 2;
                  return e;
                }))
                .map(transforms::Stack<>());
  CHECK(ds.size().value() == 5);
  Example<> b = ds.get_batch({4, 1});
  CHECK(b.data.sizes() == Shape{2, 2});
  CHECK(b.data.to_vector<float>() == std::vector<float>{8, -8, 2, -2});
  CHECK(targets_of(b) == std::vector<int64_t>{4, 1});

  transforms::Normalize<> norm({0.5, 1.0}, {2.0, 4.0});
  Tensor img = ones({2, 1, 2});
  CHECK(norm(img).to_vector<float>() == std::vector<float>{0.25f, 0.25f, 0, 0});
  transforms::Normalize<> one(0.5, 0.25);
  CHECK(one(ones({1, 2, 2})).to_vector<float>() == std::vector<float>(4, 2.0f));
}

TEST_CASE("samplers follow libtorch's rules") {
  samplers::SequentialSampler seq(5);
  CHECK(*seq.next(2) == std::vector<size_t>{0, 1});
  CHECK(*seq.next(2) == std::vector<size_t>{2, 3});
  CHECK(*seq.next(2) == std::vector<size_t>{4});
  CHECK(!seq.next(2));
  seq.reset(3);
  CHECK(*seq.next(5) == std::vector<size_t>{0, 1, 2});

  manual_seed(3);
  samplers::RandomSampler r(10);
  std::vector<size_t> got;
  while (auto b = r.next(4)) got.insert(got.end(), b->begin(), b->end());
  std::vector<size_t> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  std::vector<size_t> all(10);
  std::iota(all.begin(), all.end(), size_t(0));
  CHECK(sorted == all);
  manual_seed(3);
  samplers::RandomSampler again(10);
  CHECK(*again.next(10) == got);  // the generator decides the order

  // 10 items over 3 replicas: 4 each, padded by repeating the start; the
  // replicas' parts of one shuffled order are disjoint but for the padding.
  std::multiset<size_t> seen;
  for (size_t rank = 0; rank < 3; ++rank) {
    samplers::DistributedRandomSampler d(10, 3, rank);
    d.set_epoch(7);
    d.reset();
    auto part = *d.next(100);
    CHECK(part.size() == 4);
    seen.insert(part.begin(), part.end());
  }
  CHECK(seen.size() == 12);
  for (size_t i = 0; i < 10; ++i) CHECK(seen.count(i) >= 1);
  // Without duplicates each replica gets floor(10 / 3).
  samplers::DistributedRandomSampler strict(10, 3, 2, false);
  CHECK(strict.next(100)->size() == 3);
  // The shuffle depends on the epoch only.
  samplers::DistributedRandomSampler a(10, 2, 0), b(10, 2, 0);
  a.set_epoch(1);
  a.reset();
  b.set_epoch(1);
  b.reset();
  CHECK(*a.next(5) == *b.next(5));
  samplers::DistributedSequentialSampler ds(5, 2, 1);
  CHECK(*ds.next(10) == std::vector<size_t>{3, 4, 0});
  KILN_CHECK_ERROR(samplers::DistributedRandomSampler(10, 2, 2), "rank 2 of 2");
}

TEST_CASE(
    "a loader without workers gives the batches in sampler order, drop_last drops the short one") {
  auto loader =
      make_data_loader<samplers::SequentialSampler>(Numbers(7).map(transforms::Stack<>()), 3);
  CHECK(all_batches(*loader) == std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6}});
  CHECK(all_batches(*loader).size() == 3);  // a second pass
  auto dropping =
      make_data_loader(Numbers(7).map(transforms::Stack<>()), samplers::SequentialSampler(7),
                       LoaderOptions(3).drop_last(true));
  CHECK(all_batches(*dropping) == std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}});
  KILN_CHECK_ERROR(make_data_loader(Numbers(3).map(transforms::Stack<>()), LoaderOptions(0)),
                   "batch_size > 0");
}

TEST_CASE("workers build batches in parallel, in order, and pass errors on") {
  // 12 batches of one example that each take 20 ms: 4 workers take about a
  // quarter of the time one thread would.
  auto slow = Numbers(12, -1, 20).map(transforms::Stack<>());
  auto loader =
      make_data_loader(slow, samplers::SequentialSampler(12), LoaderOptions(1).workers(4));
  const auto t0 = std::chrono::steady_clock::now();
  auto batches = all_batches(*loader);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(batches.size() == 12);
  for (int64_t i = 0; i < 12; ++i) CHECK(batches[size_t(i)] == std::vector<int64_t>{i});
  CHECK(ms < 12 * 20 * 0.7);

  // A new pass while one is in flight starts over.
  int n = 0;
  for (auto& b : *loader) {
    (void)b;
    if (++n == 2) break;
  }
  CHECK(all_batches(*loader).size() == 12);

  auto broken = make_data_loader(Numbers(6, 4).map(transforms::Stack<>()),
                                 samplers::SequentialSampler(6), LoaderOptions(2).workers(2));
  KILN_CHECK_ERROR(all_batches(*broken), "example 4 is broken");

  // Without ordering every batch still comes exactly once.
  auto any_order =
      make_data_loader(Numbers(9).map(transforms::Stack<>()), samplers::SequentialSampler(9),
                       LoaderOptions(2).workers(3).enforce_ordering(false));
  std::multiset<int64_t> seen;
  for (auto& b : all_batches(*any_order)) seen.insert(b.begin(), b.end());
  CHECK(seen.size() == 9);
}

TEST_CASE("MNIST reads idx files of any count and size, and names a bad file") {
  const std::string dir = idx_dir();
  write_idx(dir, "train", 3, 4, 5);
  write_idx(dir, "t10k", 2, 4, 5);
  datasets::MNIST train(dir), test(dir, datasets::MNIST::Mode::kTest);
  CHECK(train.size().value() == 3);
  CHECK(test.size().value() == 2);
  CHECK(train.is_train());
  CHECK(train.images().sizes() == Shape{3, 1, 4, 5});
  Example<> e = train.get(1);
  CHECK(e.data.sizes() == Shape{1, 4, 5});
  CHECK(e.data.flatten().to_vector<float>()[0] == doctest::Approx(20.0 / 255.0));
  CHECK(e.target.item<int64_t>() == 1);
  CHECK(e.target.dtype() == kInt64);

  std::ofstream(dir + "/t10k-labels-idx1-ubyte", std::ios::binary) << be32(0x801) + be32(5) + "ab";
  KILN_CHECK_ERROR(datasets::MNIST(dir, datasets::MNIST::Mode::kTest), "t10k-labels-idx1-ubyte",
                   "expected 13");
  std::ofstream(dir + "/t10k-labels-idx1-ubyte", std::ios::binary) << be32(0x803) + be32(0);
  KILN_CHECK_ERROR(datasets::MNIST(dir, datasets::MNIST::Mode::kTest), "magic number 2051");
  KILN_CHECK_ERROR(datasets::MNIST(dir + "/none"), "cannot open", "train-images-idx3-ubyte");
  fs::remove_all(dir);
}

TEST_CASE("TensorDataset gives rows without targets") {
  datasets::TensorDataset ds(arange(6).reshape({3, 2}));
  CHECK(ds.size().value() == 3);
  CHECK(ds.get(2).data.to_vector<int64_t>() == std::vector<int64_t>{4, 5});
  auto loader = make_data_loader<samplers::SequentialSampler>(
      std::move(ds).map(transforms::Stack<TensorExample>()), 2);
  std::vector<Shape> shapes;
  for (auto& b : *loader) shapes.push_back(b.data.sizes());
  CHECK(shapes == std::vector<Shape>{{2, 2}, {1, 2}});
}

}  // namespace
}  // namespace kiln
