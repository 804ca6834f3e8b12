// kiln::data: TensorDataset rows and subsets, DataLoader batching, seeded
// shuffles and rank sharding (against DistributedSampler's rules),
// train_test_split, read_csv on plain and gzip files, every error, and the
// digits data set in examples/data.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>

#include "frontend/data.h"
#include "frontend/tensor_impl.h"
#include "test_util.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

std::string data_dir() {
  fs::path d = fs::temp_directory_path() / ("kiln_data_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d.string();
}

std::string write_file(const std::string& name, const std::string& bytes) {
  std::string path = data_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// CRC-32 as gzip's trailer has it (RFC 1952).
uint32_t crc32_of(std::string_view s) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put_le(std::string& out, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// One gzip member holding `data` in stored (uncompressed) deflate blocks of at
// most 65535 bytes (RFC 1951 3.2.4). Real deflate is covered by digits.csv.gz.
std::string gzip_stored(std::string_view data) {
  std::string out("\x1f\x8b\x08\0\0\0\0\0\0\xff", 10);
  size_t pos = 0;
  do {
    size_t n = std::min<size_t>(data.size() - pos, 65535);
    out += static_cast<char>(pos + n == data.size() ? 1 : 0);
    put_le(out, static_cast<uint32_t>(n), 2);
    put_le(out, static_cast<uint32_t>(~n & 0xffff), 2);
    out.append(data.substr(pos, n));
    pos += n;
  } while (pos < data.size());
  put_le(out, crc32_of(data), 4);
  put_le(out, static_cast<uint32_t>(data.size()), 4);
  return out;
}

// Rows 0..n-1 as data: x[i] = {i, 10 i} (f32), y[i] = i (i64).
data::TensorDataset numbered(int64_t n) {
  Tensor x = arange(0, n, 1, kFloat32).unsqueeze(1) * tensor({1.f, 10.f});
  return data::TensorDataset({x, arange(n)});
}

// The dataset rows of every batch, read back from the labels column.
std::vector<int64_t> rows_seen(const data::DataLoader& loader) {
  std::vector<int64_t> rows;
  for (const auto& batch : loader) {
    std::vector<int64_t> y = batch[1].to_vector<int64_t>();
    rows.insert(rows.end(), y.begin(), y.end());
  }
  return rows;
}

std::vector<int64_t> iota_vec(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

bool is_permutation_of_n(std::vector<int64_t> v, int64_t n) {
  std::sort(v.begin(), v.end());
  return v == iota_vec(n);
}

}  // namespace

TEST_CASE("data: TensorDataset rows, subsets and errors") {
  data::TensorDataset ds = numbered(6);
  CHECK(ds.size() == 6);
  std::vector<Tensor> row = ds.get(2);
  REQUIRE(row.size() == 2);
  CHECK(row[0].to_vector<float>() == std::vector<float>{2, 20});
  CHECK(row[1].item<int64_t>() == 2);

  data::TensorDataset sub = ds.subset({5, 0, 5});
  CHECK(sub.size() == 3);
  CHECK(sub.tensors()[1].to_vector<int64_t>() == std::vector<int64_t>{5, 0, 5});
  CHECK(sub.tensors()[0].sizes() == Shape{3, 2});
  CHECK(ds.subset({}).size() == 0);

  KILN_CHECK_ERROR(data::TensorDataset({}), "no tensors");
  KILN_CHECK_ERROR(data::TensorDataset({zeros({6, 2}), zeros({5})}), "tensor 0 has 6 rows",
                   "[6,2]", "tensor 1 has 5", "[5]", "same size in dim 0");
  KILN_CHECK_ERROR(data::TensorDataset({zeros({3}), Tensor()}), "tensor 1 is undefined");
  KILN_CHECK_ERROR(data::TensorDataset({scalar_tensor(1.0)}), "tensor 0 is 0-d");
  KILN_CHECK_ERROR(ds.get(6), "row 6 is out of range", "6 rows");
  KILN_CHECK_ERROR(ds.get(-1), "row -1 is out of range");
  KILN_CHECK_ERROR(ds.subset({0, 7}), "rows[1] = 7 is out of range");

  // A CUDA tensor (its device is all the check reads): keep datasets on the CPU.
  auto impl = make_dense(TensorType{DType::f32, {4}, Device()});
  impl->type.device = Device(kCUDA);
  KILN_CHECK_ERROR(data::TensorDataset({Tensor(impl)}), "tensor 0 is on cuda:0",
                   "keep the dataset on the CPU", ".to(kCUDA)");
}

TEST_CASE("data: DataLoader batches rows in order, keeping dtypes and row shapes") {
  manual_seed(3);
  Tensor images = randn({10, 2, 3}, kFloat64);
  Tensor ids = arange(10).to(kInt32);
  Tensor flags = arange(10).lt(4);
  data::DataLoader loader(data::TensorDataset({images, ids, flags}), {.batch_size = 4});
  CHECK(loader.size() == 3);
  std::vector<int64_t> sizes;
  int64_t start = 0;
  for (const std::vector<Tensor>& batch : loader) {
    REQUIRE(batch.size() == 3);
    int64_t n = batch[0].size(0);
    sizes.push_back(n);
    CHECK(batch[0].sizes() == Shape{n, 2, 3});
    CHECK(batch[0].dtype() == kFloat64);
    CHECK(batch[1].dtype() == kInt32);
    CHECK(batch[2].dtype() == kBool);
    CHECK(batch[0].is_contiguous());
    CHECK(equal(batch[0], images.narrow(0, start, n)));
    CHECK(equal(batch[1], ids.narrow(0, start, n)));
    CHECK(equal(batch[2], flags.narrow(0, start, n)));
    start += n;
  }
  CHECK(sizes == std::vector<int64_t>{4, 4, 2});

  // A batch is a copy: writing into it leaves the dataset alone.
  Tensor first = (*loader.begin())[0];
  first.zero_();
  CHECK(images.abs().sum().item<double>() > 0);

  // A strided (transposed) dataset tensor is read in its logical order.
  Tensor wide = arange(0.0, 12.0).reshape({3, 4}).t();  // [4, 3], not contiguous
  data::DataLoader strided(data::TensorDataset({wide}), {.batch_size = 3});
  CHECK(equal((*strided.begin())[0], wide.narrow(0, 0, 3)));
}

TEST_CASE("data: drop_last, batch sizes and empty datasets") {
  data::DataLoader keep(numbered(10), {.batch_size = 4});
  data::DataLoader drop(numbered(10), {.batch_size = 4, .drop_last = true});
  CHECK(keep.size() == 3);
  CHECK(drop.size() == 2);
  CHECK(rows_seen(keep) == iota_vec(10));
  CHECK(rows_seen(drop) == iota_vec(8));
  CHECK(data::DataLoader(numbered(10), {.batch_size = 5, .drop_last = true}).size() == 2);
  CHECK(data::DataLoader(numbered(3), {.batch_size = 8}).size() == 1);
  CHECK(data::DataLoader(numbered(3), {.batch_size = 8, .drop_last = true}).size() == 0);
  data::DataLoader empty(numbered(0), {.batch_size = 2, .shuffle = true});
  CHECK(empty.size() == 0);
  CHECK(empty.begin() == empty.end());
  CHECK(rows_seen(data::DataLoader(numbered(3), {.batch_size = 8, .drop_last = true})).empty());
}

TEST_CASE("data: seeded shuffles are deterministic per (seed, epoch) and visit every row once") {
  data::DataLoaderOptions o{.batch_size = 3, .shuffle = true, .seed = 7};
  data::DataLoader a(numbered(50), o), b(numbered(50), o);
  std::vector<int64_t> epoch0 = rows_seen(a);
  CHECK(is_permutation_of_n(epoch0, 50));
  CHECK(epoch0 != iota_vec(50));
  CHECK(rows_seen(b) == epoch0);
  CHECK(rows_seen(a) == epoch0);  // a second pass of the same epoch: the same order
  CHECK(a.indices() == epoch0);

  a.set_epoch(1);
  CHECK(a.epoch() == 1);
  std::vector<int64_t> epoch1 = rows_seen(a);
  CHECK(is_permutation_of_n(epoch1, 50));
  CHECK(epoch1 != epoch0);
  b.set_epoch(1);
  CHECK(rows_seen(b) == epoch1);
  a.set_epoch(0);
  CHECK(rows_seen(a) == epoch0);

  o.seed = 8;
  CHECK(rows_seen(data::DataLoader(numbered(50), o)) != epoch0);
  // Both halves of a 64-bit seed and epoch count.
  o.seed = 7 + (uint64_t{1} << 32);
  CHECK(data::DataLoader(numbered(50), o).indices() != epoch0);

  // The order is pinned: mt19937_64 and Kiln's Fisher-Yates are the same everywhere.
  data::DataLoader pinned(numbered(10), {.batch_size = 4, .shuffle = true, .seed = 0});
  CHECK(pinned.indices() == std::vector<int64_t>{8, 2, 3, 5, 1, 6, 9, 7, 0, 4});

  // Batches hold the rows indices() names, features and labels together.
  for (const auto& batch : a) {
    std::vector<int64_t> y = batch[1].to_vector<int64_t>();
    std::vector<float> x = batch[0].to_vector<float>();
    for (size_t i = 0; i < y.size(); ++i) {
      CHECK(x[2 * i] == static_cast<float>(y[i]));
      CHECK(x[2 * i + 1] == static_cast<float>(10 * y[i]));
    }
  }
}

TEST_CASE("data: ranks share the rows as DistributedSampler does") {
  auto rank_rows = [](int64_t n, data::DataLoaderOptions o, int64_t rank) {
    o.rank = rank;
    return data::DataLoader(numbered(n), o).indices();
  };
  // Not divisible: padded by repeating the order from its start.
  data::DataLoaderOptions o{.batch_size = 2, .world_size = 3};
  CHECK(rank_rows(10, o, 0) == std::vector<int64_t>{0, 3, 6, 9});
  CHECK(rank_rows(10, o, 1) == std::vector<int64_t>{1, 4, 7, 0});
  CHECK(rank_rows(10, o, 2) == std::vector<int64_t>{2, 5, 8, 1});
  for (int64_t r = 0; r < 3; ++r) {
    o.rank = r;
    CHECK(data::DataLoader(numbered(10), o).size() == 2);
  }
  // drop_last drops the tail instead.
  o.drop_last = true;
  CHECK(rank_rows(10, o, 0) == std::vector<int64_t>{0, 3, 6});
  CHECK(rank_rows(10, o, 2) == std::vector<int64_t>{2, 5, 8});
  // Fewer rows than ranks: every rank still gets one.
  CHECK(rank_rows(2, {.world_size = 4}, 3) == std::vector<int64_t>{1});

  // Shuffled, with and without padding: the union is every row; disjoint when divisible.
  for (int64_t n : {12, 13}) {
    for (int64_t epoch : {0, 1}) {
      std::vector<int64_t> all;
      std::set<int64_t> distinct;
      std::vector<int64_t> batches;
      for (int64_t r = 0; r < 4; ++r) {
        data::DataLoader loader(
            numbered(n), {.batch_size = 2, .shuffle = true, .seed = 5, .rank = r, .world_size = 4});
        loader.set_epoch(epoch);
        std::vector<int64_t> mine = rows_seen(loader);
        CHECK(mine == loader.indices());
        all.insert(all.end(), mine.begin(), mine.end());
        distinct.insert(mine.begin(), mine.end());
        batches.push_back(loader.size());
      }
      CHECK(distinct.size() == static_cast<size_t>(n));
      CHECK(std::count(batches.begin(), batches.end(), batches[0]) == 4);
      if (n % 4 == 0) CHECK(all.size() == static_cast<size_t>(n));
      if (n % 4 != 0) CHECK(all.size() == 16);
    }
  }
}

TEST_CASE("data: DataLoader option errors") {
  KILN_CHECK_ERROR(data::DataLoader(numbered(4), {.batch_size = 0}),
                   "batch_size must be at least 1, got 0");
  KILN_CHECK_ERROR(data::DataLoader(numbered(4), {.world_size = 0}),
                   "world_size must be at least 1, got 0");
  KILN_CHECK_ERROR(data::DataLoader(numbered(4), {.rank = 2, .world_size = 2}),
                   "rank 2 is outside [0, world_size) = [0, 2)");
  KILN_CHECK_ERROR(data::DataLoader(numbered(4), {.rank = -1}), "rank -1 is outside");
  std::string msg = test::error_of([] { (void)data::DataLoader(numbered(4), {.batch_size = -3}); });
  CHECK(msg.find("data_test.cpp") != std::string::npos);  // the caller's line
}

TEST_CASE("data: train_test_split") {
  data::Split s = data::train_test_split(10, 0.3, 1);
  CHECK(s.test.size() == 3);
  CHECK(s.train.size() == 7);
  CHECK(std::is_sorted(s.train.begin(), s.train.end()));
  CHECK(std::is_sorted(s.test.begin(), s.test.end()));
  std::vector<int64_t> all = s.train;
  all.insert(all.end(), s.test.begin(), s.test.end());
  CHECK(is_permutation_of_n(all, 10));
  CHECK(data::train_test_split(10, 0.3, 1).test == s.test);
  bool differs = false;
  for (uint64_t seed = 2; seed < 6; ++seed)
    differs |= data::train_test_split(10, 0.3, seed).test != s.test;
  CHECK(differs);
  CHECK(data::train_test_split(10, 0.0).test.empty());
  CHECK(data::train_test_split(10, 1.0).train.empty());
  CHECK(data::train_test_split(0, 0.5).test.empty());

  data::TensorDataset ds = numbered(10);
  data::TensorDataset test = ds.subset(s.test);
  CHECK(test.tensors()[1].to_vector<int64_t>() == s.test);

  KILN_CHECK_ERROR(data::train_test_split(10, 1.5), "test_fraction must be in [0, 1], got 1.5");
  KILN_CHECK_ERROR(data::train_test_split(10, -0.1), "got -0.1");
  KILN_CHECK_ERROR(data::train_test_split(10, std::nan("")), "test_fraction must be in [0, 1]");
  KILN_CHECK_ERROR(data::train_test_split(-1, 0.5), "n must be non-negative, got -1");
}

TEST_CASE("data: read_csv reads numbers, headers, delimiters and dtypes") {
  std::string path = write_file("plain.csv", "\xEF\xBB\xBFx,y\n1,2.5\n-3, +4e2\r\n\n  7 ,nan\n");
  Tensor t = data::read_csv(path, {.skip_rows = 1});
  CHECK(t.dtype() == kFloat32);
  REQUIRE(t.sizes() == Shape{3, 2});
  std::vector<float> v = t.to_vector<float>();
  CHECK(std::vector<float>(v.begin(), v.begin() + 5) == std::vector<float>{1, 2.5f, -3, 400, 7});
  CHECK(std::isnan(v[5]));

  CHECK(equal(data::parse_csv("1;2\n3;4", "s", {.delimiter = ';', .dtype = kInt64}),
              tensor({{1, 2}, {3, 4}})));
  CHECK(equal(data::parse_csv("  1   2\t3 \n4 5 6\n", "s", {.delimiter = ' ', .dtype = kInt32}),
              tensor({{1, 2, 3}, {4, 5, 6}}, kInt32)));
  CHECK(equal(data::parse_csv("1\t2\n", "s", {.delimiter = '\t', .dtype = kFloat64}),
              tensor({{1., 2.}}, kFloat64)));
  CHECK(equal(data::parse_csv("1,0\ntrue,False\n", "s", {.dtype = kBool}),
              tensor({true, false, true, false}).reshape({2, 2})));
  Tensor big = data::parse_csv("9007199254740993,-9223372036854775808\n", "s", {.dtype = kInt64});
  CHECK(big.to_vector<int64_t>() ==
        std::vector<int64_t>{9007199254740993, std::numeric_limits<int64_t>::min()});
  CHECK(data::parse_csv("5", "s").sizes() == Shape{1, 1});
}

TEST_CASE("data: read_csv inflates gzip files") {
  std::string text = "a,b\n";
  for (int i = 0; i < 10000; ++i) text += std::to_string(i) + "," + std::to_string(2 * i) + "\n";
  REQUIRE(text.size() > 65535);  // more than one stored block
  Tensor want = data::parse_csv(text, "text", {.skip_rows = 1});
  CHECK(want.sizes() == Shape{10000, 2});
  CHECK(equal(data::read_csv(write_file("t.csv.gz", gzip_stored(text)), {.skip_rows = 1}), want));
  // Concatenated members (cat a.gz b.gz), and gzip data under a name without .gz.
  std::string two = gzip_stored(text.substr(0, 30000)) + gzip_stored(text.substr(30000));
  CHECK(equal(data::read_csv(write_file("two.csv.gz", two), {.skip_rows = 1}), want));
  CHECK(equal(data::read_csv(write_file("gz_inside.csv", gzip_stored(text)), {.skip_rows = 1}),
              want));
  // Zero padding after the data, as gzip allows.
  std::string padded = gzip_stored("1,2\n") + std::string(8, '\0');
  CHECK(equal(data::read_csv(write_file("padded.csv.gz", padded)), tensor({{1.f, 2.f}})));
}

TEST_CASE("data: read_csv errors name the file, the line and the column") {
  std::string missing = data_dir() + "/missing.csv";
  KILN_CHECK_ERROR(data::read_csv(missing), "missing.csv", "cannot open");
  KILN_CHECK_ERROR(data::read_csv(data_dir()), "is a directory");
  std::string ragged = write_file("ragged.csv", "h1,h2,h3\n1,2,3\n4,5,6\n7,8\n");
  KILN_CHECK_ERROR(data::read_csv(ragged, {.skip_rows = 1}), "ragged.csv: line 4 has 2 columns",
                   "expected 3", "as line 2");
  KILN_CHECK_ERROR(data::parse_csv("1,2\n3,4,5\n", "r.csv"), "line 2 has 3 columns, expected 2");
  KILN_CHECK_ERROR(data::read_csv(write_file("word.csv", "1,2\n3,abc\n")),
                   "word.csv: line 2, column 2: cannot read 'abc' as float32", "expected a number");
  KILN_CHECK_ERROR(data::parse_csv("1,,2\n", "e.csv"), "line 1, column 2", "an empty field");
  KILN_CHECK_ERROR(data::parse_csv("1,2,\n", "e.csv"), "line 1, column 3", "an empty field");
  KILN_CHECK_ERROR(data::parse_csv("1\n2.5\n", "i.csv", {.dtype = kInt64}),
                   "line 2, column 1: cannot read '2.5' as int64 (expected an integer)");
  KILN_CHECK_ERROR(data::parse_csv("3000000000\n", "i.csv", {.dtype = kInt32}),
                   "cannot read '3000000000' as int32 (out of range for int32)");
  KILN_CHECK_ERROR(data::parse_csv("1e60\n", "f.csv"), "out of range for float32");
  KILN_CHECK_ERROR(data::parse_csv("2\n", "b.csv", {.dtype = kBool}),
                   "expected 0, 1, true or false");
  KILN_CHECK_ERROR(data::parse_csv("1,\x01\xff\n", "bin.csv"), "'\\x01\\xff'");
  KILN_CHECK_ERROR(data::parse_csv("", "empty.csv"), "empty.csv: no rows of data");
  KILN_CHECK_ERROR(data::parse_csv("a,b\n\n", "head.csv", {.skip_rows = 1}),
                   "no rows of data after skipping 1 line ");
  KILN_CHECK_ERROR(data::parse_csv("1\n", "s", {.skip_rows = -1}),
                   "skip_rows must be non-negative, got -1");
  KILN_CHECK_ERROR(data::parse_csv("1\n", "s", {.delimiter = '\n'}), "delimiter cannot be");

  std::string gz = gzip_stored("1,2\n3,4\n");
  KILN_CHECK_ERROR(data::read_csv(write_file("plain.csv.gz", "1,2\n")), "plain.csv.gz",
                   "not gzip data", "1f 8b");
  KILN_CHECK_ERROR(data::read_csv(write_file("short.csv.gz", gz.substr(0, gz.size() - 6))),
                   "short.csv.gz: truncated");
  std::string bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0x55;
  KILN_CHECK_ERROR(data::read_csv(write_file("crc.csv.gz", bad_crc)), "crc.csv.gz",
                   "damaged gzip data", "incorrect data check");
  KILN_CHECK_ERROR(data::read_csv(write_file("tail.csv.gz", gz + "junk")), "tail.csv.gz",
                   "4 bytes after the end of the gzip data", "not another gzip member");
}

TEST_CASE("data: the digits data set in examples/data") {
  Tensor digits = data::read_csv(KILN_SOURCE_DIR "/examples/data/digits.csv.gz");
  REQUIRE(digits.sizes() == Shape{1797, 65});
  Tensor pixels = digits.narrow(1, 0, 64), labels = digits.select(1, 64).to(kInt64);
  CHECK(pixels.min().item<float>() == 0);
  CHECK(pixels.max().item<float>() == 16);
  CHECK(equal(pixels, pixels.to(kInt64).to(kFloat32)));  // whole numbers
  std::vector<int64_t> count(10);
  for (int64_t y : labels.to_vector<int64_t>()) {
    REQUIRE(y >= 0);
    REQUIRE(y <= 9);
    ++count[static_cast<size_t>(y)];
  }
  CHECK(count == std::vector<int64_t>{178, 182, 177, 183, 181, 182, 181, 179, 174, 180});

  // The whole path: split, load in shuffled batches.
  data::TensorDataset ds({pixels, labels});
  data::Split split = data::train_test_split(ds.size(), 0.2, 0);
  CHECK(split.test.size() == 359);
  data::DataLoader loader(ds.subset(split.train),
                          {.batch_size = 64, .shuffle = true, .drop_last = true});
  CHECK(loader.size() == 1438 / 64);
  int64_t rows = 0;
  for (const auto& batch : loader) {
    CHECK(batch[0].sizes() == Shape{64, 64});
    CHECK(batch[1].sizes() == Shape{64});
    rows += batch[1].size(0);
  }
  CHECK(rows == 64 * (1438 / 64));
}

}  // namespace kiln
