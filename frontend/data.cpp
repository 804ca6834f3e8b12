// Datasets, loaders, splits and CSV reading (see data.h). Batches are gathered
// with memcpy from dense CPU tensors, a run of consecutive rows in one copy;
// gzip is inflated in memory with zlib.
#include "frontend/data.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <type_traits>

#include "frontend/tensor_impl.h"
#include "runtime/allocator.h"
#include "runtime/binary_io.h"
#include "runtime/reference.h"

namespace kiln::data {
namespace {

[[noreturn]] void fail(const std::string& message, const Loc& loc) {
  throw Error(message, SourceLoc::from(loc));
}

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// ---- shuffling ----

// A uniform integer in [0, bound), by rejection: the same on every platform,
// which std::uniform_int_distribution (its algorithm is the library's) is not.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  uint64_t reject_under = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    uint64_t r = rng();
    if (r >= reject_under) return r % bound;
  }
}

// 0..n-1 in an order that depends only on (seed, epoch): Fisher-Yates driven by
// mt19937_64 seeded through seed_seq, both specified exactly by the standard.
std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  auto e = static_cast<uint64_t>(epoch);
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(e), static_cast<uint32_t>(e >> 32)};
  std::mt19937_64 rng(seq);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(p[static_cast<size_t>(i)], p[uniform_below(rng, static_cast<uint64_t>(i) + 1)]);
  return p;
}

// Rows per rank in a pass: DistributedSampler's num_samples.
int64_t rows_per_rank(int64_t n, bool drop_last, int64_t world_size) {
  return n / world_size + (!drop_last && n % world_size != 0);
}

// ---- gathering rows ----

// t's elements in a dense row-major buffer: t itself when it is one, else a
// copy (made by the reference kernel, so no autograd or trace sees it).
Tensor dense(const Tensor& t) {
  if (t.is_contiguous()) return t;
  auto out = make_dense(t.impl()->type);
  copy_to(t.impl()->view(), out->view());
  return Tensor(out);
}

// The given rows of a dense CPU tensor, in a new tensor [rows.size(), ...].
Tensor gather_rows(const Tensor& src, std::span<const int64_t> rows) {
  Shape shape = src.sizes();
  shape[0] = static_cast<int64_t>(rows.size());
  auto out = make_dense(TensorType{src.dtype(), shape, Device()});
  size_t row_bytes = dtype_size(src.dtype());
  for (size_t d = 1; d < shape.size(); ++d) row_bytes *= static_cast<size_t>(shape[d]);
  if (row_bytes == 0 || rows.empty()) return Tensor(out);
  const char* from = static_cast<const char*>(src.impl()->view().data);
  char* to = static_cast<char*>(out->view().data);
  for (size_t k = 0; k < rows.size();) {
    size_t run = 1;
    while (k + run < rows.size() && rows[k + run] == rows[k] + static_cast<int64_t>(run)) ++run;
    std::memcpy(to + k * row_bytes, from + static_cast<size_t>(rows[k]) * row_bytes,
                run * row_bytes);
    k += run;
  }
  return Tensor(out);
}

}  // namespace

// ---- TensorDataset ----

TensorDataset::TensorDataset(std::vector<Tensor> tensors, Loc loc) : tensors_(std::move(tensors)) {
  if (tensors_.empty())
    fail("TensorDataset: no tensors (expected at least one, e.g. {inputs, targets})", loc);
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const Tensor& t = tensors_[k];
    std::string which = "TensorDataset: tensor " + std::to_string(k);
    if (!t.defined()) fail(which + " is undefined", loc);
    if (t.is_symbolic())
      fail(which +
               " is symbolic (it holds no data inside a trace; make the dataset outside "
               "the traced function)",
           loc);
    if (!t.device().is_cpu())
      fail(which + " is on " + t.device().str() +
               " (expected the CPU: keep the dataset on the CPU and move each batch to the "
               "device with .to(kCUDA))",
           loc);
    if (t.dim() == 0)
      fail(which + " is 0-d (expected at least one dimension; dim 0 counts the rows)", loc);
  }
  size_ = tensors_[0].size(0);
  for (size_t k = 1; k < tensors_.size(); ++k)
    if (tensors_[k].size(0) != size_)
      fail("TensorDataset: tensor 0 has " + std::to_string(size_) + " rows (shape " +
               shape_str(tensors_[0].sizes()) + ") but tensor " + std::to_string(k) + " has " +
               std::to_string(tensors_[k].size(0)) + " (shape " + shape_str(tensors_[k].sizes()) +
               "); expected the same size in dim 0",
           loc);
}

std::vector<Tensor> TensorDataset::get(int64_t i, Loc loc) const {
  if (i < 0 || i >= size_)
    fail("TensorDataset::get: row " + std::to_string(i) + " is out of range for a dataset of " +
             std::to_string(size_) + " rows (expected 0 <= i < " + std::to_string(size_) + ")",
         loc);
  std::vector<Tensor> row;
  for (const Tensor& t : tensors_) row.push_back(t.select(0, i, loc));
  return row;
}

TensorDataset TensorDataset::subset(const std::vector<int64_t>& rows, Loc loc) const {
  for (size_t k = 0; k < rows.size(); ++k)
    if (rows[k] < 0 || rows[k] >= size_)
      fail("TensorDataset::subset: rows[" + std::to_string(k) + "] = " + std::to_string(rows[k]) +
               " is out of range for a dataset of " + std::to_string(size_) + " rows",
           loc);
  std::vector<Tensor> out;
  for (const Tensor& t : tensors_) out.push_back(gather_rows(dense(t), rows));
  return TensorDataset(std::move(out), loc);
}

// ---- DataLoader ----

DataLoader::DataLoader(TensorDataset dataset, DataLoaderOptions options, Loc loc)
    : dataset_(std::move(dataset)), options_(options) {
  if (options_.batch_size < 1)
    fail("DataLoader: batch_size must be at least 1, got " + std::to_string(options_.batch_size),
         loc);
  if (options_.world_size < 1)
    fail("DataLoader: world_size must be at least 1, got " + std::to_string(options_.world_size),
         loc);
  if (options_.rank < 0 || options_.rank >= options_.world_size)
    fail("DataLoader: rank " + std::to_string(options_.rank) +
             " is outside [0, world_size) = [0, " + std::to_string(options_.world_size) + ")",
         loc);
  for (const Tensor& t : dataset_.tensors()) sources_.push_back(dense(t));
}

int64_t DataLoader::size() const {
  int64_t rows = rows_per_rank(dataset_.size(), options_.drop_last, options_.world_size);
  int64_t b = options_.batch_size;
  return rows / b + (!options_.drop_last && rows % b != 0);
}

std::vector<int64_t> shard_indices(int64_t n, bool shuffle, uint64_t seed, int64_t epoch,
                                   bool drop_last, int64_t rank, int64_t world_size) {
  KILN_CHECK(n >= 0 && world_size >= 1 && rank >= 0 && rank < world_size,
             "shard_indices: expected n >= 0 and 0 <= rank < world_size, got n ", n, ", rank ",
             rank, ", world_size ", world_size);
  std::vector<int64_t> order;
  if (shuffle) {
    order = permutation(n, seed, epoch);
  } else {
    order.resize(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  // Position rank + k * world_size of the order; past its end (padding) it
  // starts again from the beginning.
  std::vector<int64_t> mine(static_cast<size_t>(rows_per_rank(n, drop_last, world_size)));
  for (size_t k = 0; k < mine.size(); ++k)
    mine[k] = order[static_cast<size_t>((rank + static_cast<int64_t>(k) * world_size) % n)];
  return mine;
}

std::vector<int64_t> DataLoader::indices() const {
  return shard_indices(dataset_.size(), options_.shuffle, options_.seed, epoch_, options_.drop_last,
                       options_.rank, options_.world_size);
}

std::vector<Tensor> DataLoader::batch(std::span<const int64_t> rows) const {
  std::vector<Tensor> out;
  out.reserve(sources_.size());
  for (const Tensor& s : sources_) out.push_back(gather_rows(s, rows));
  return out;
}

DataLoader::Iterator DataLoader::begin() const {
  Iterator it;
  it.loader_ = this;
  it.rows_ = std::make_shared<const std::vector<int64_t>>(indices());
  it.index_ = -1;
  return ++it;
}

DataLoader::Iterator DataLoader::end() const {
  Iterator it;
  it.loader_ = this;
  it.index_ = size();
  return it;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++index_;
  batch_.clear();
  if (index_ < loader_->size()) {
    auto b = static_cast<size_t>(loader_->options_.batch_size);
    size_t start = static_cast<size_t>(index_) * b;
    batch_ = loader_->batch(std::span(*rows_).subspan(start, std::min(b, rows_->size() - start)));
  }
  return *this;
}

// ---- train_test_split ----

Split train_test_split(int64_t n, double test_fraction, uint64_t seed, Loc loc) {
  if (n < 0) fail("train_test_split: n must be non-negative, got " + std::to_string(n), loc);
  if (!(test_fraction >= 0 && test_fraction <= 1))
    fail("train_test_split: test_fraction must be in [0, 1], got " + num(test_fraction), loc);
  auto n_test = std::clamp<int64_t>(std::llround(test_fraction * static_cast<double>(n)), 0, n);
  std::vector<int64_t> p = permutation(n, seed, 0);
  Split s;
  s.test.assign(p.begin(), p.begin() + n_test);
  s.train.assign(p.begin() + n_test, p.end());
  std::sort(s.test.begin(), s.test.end());
  std::sort(s.train.begin(), s.train.end());
  return s;
}

// ---- CSV ----

namespace {

bool gzip_magic(std::string_view bytes, size_t at) {
  return bytes.size() >= at + 2 && static_cast<unsigned char>(bytes[at]) == 0x1f &&
         static_cast<unsigned char>(bytes[at + 1]) == 0x8b;
}

// The data of a gzip file; several members (cat a.gz b.gz) are read one after another.
std::string gunzip(std::string_view bytes, const std::string& name) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    throw Error(name + ": zlib could not start inflating (out of memory?)");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};
  constexpr size_t kChunk = size_t{1} << 30;  // zlib's counts are 32-bit
  check_host_bytes(std::max<size_t>(bytes.size() * 4, 1 << 16), "inflating " + name);
  std::string out(std::max<size_t>(bytes.size() * 4, 1 << 16), '\0');
  size_t in_at = 0, out_at = 0;
  for (;;) {
    if (zs.avail_in == 0 && in_at < bytes.size()) {
      size_t n = std::min(bytes.size() - in_at, kChunk);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + in_at));
      zs.avail_in = static_cast<uInt>(n);
      in_at += n;
    }
    if (out_at == out.size()) {
      check_host_bytes(out.size() * 2, "inflating " + name);  // a gzip bomb is an error
      out.resize(out.size() * 2);
    }
    size_t room = std::min(out.size() - out_at, kChunk);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_at);
    zs.avail_out = static_cast<uInt>(room);
    int rc = inflate(&zs, Z_NO_FLUSH);
    out_at += room - zs.avail_out;
    size_t consumed = in_at - zs.avail_in;
    if (rc == Z_STREAM_END) {
      // gzip allows zero padding after the last member.
      if (bytes.find_first_not_of('\0', consumed) == std::string_view::npos) break;
      if (!gzip_magic(bytes, consumed))
        throw Error(name + ": damaged: " + std::to_string(bytes.size() - consumed) +
                    " bytes after the end of the gzip data (at byte " + std::to_string(consumed) +
                    ") that are not another gzip member");
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_out > 0 && consumed == bytes.size())
      throw Error(name + ": truncated: the gzip data ends after " + std::to_string(bytes.size()) +
                  " bytes, before the end of its stream");
    if (rc == Z_BUF_ERROR) continue;
    if (rc == Z_DATA_ERROR)
      throw Error(name + ": damaged gzip data near byte " + std::to_string(consumed) + " (" +
                  (zs.msg ? zs.msg : "invalid data") + ")");
    if (rc == Z_MEM_ERROR) throw Error(name + ": out of memory while inflating the gzip data");
    throw Error(name + ": zlib's inflate failed with code " + std::to_string(rc));
  }
  out.resize(out_at);
  return out;
}

// A field's text for a message: quoted, at most 40 characters, odd bytes as \xNN.
std::string quoted(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 40; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out + (s.size() > 40 ? "'..." : "'");
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// The fields of one line (no line break), trimmed.
void split_fields(std::string_view line, char delimiter, std::vector<std::string_view>& fields) {
  fields.clear();
  if (delimiter == ' ') {
    size_t i = 0;
    for (;;) {
      while (i < line.size() && is_blank(line[i])) ++i;
      if (i == line.size()) return;
      size_t start = i;
      while (i < line.size() && !is_blank(line[i])) ++i;
      fields.push_back(line.substr(start, i - start));
    }
  }
  for (size_t start = 0;;) {
    size_t at = line.find(delimiter, start);
    fields.push_back(trim(line.substr(start, at == std::string_view::npos ? at : at - start)));
    if (at == std::string_view::npos) return;
    start = at + 1;
  }
}

// Parses one field as T (uint8_t standing for bool); on failure, why not.
template <class T>
std::optional<std::string> parse_field(std::string_view s, T& v, DType dtype) {
  if (s.empty()) return "an empty field";
  if constexpr (std::is_same_v<T, uint8_t>) {
    bool zero = s == "0" || s == "false" || s == "False";
    bool one = s == "1" || s == "true" || s == "True";
    if (!zero && !one) return "expected 0, 1, true or false";
    v = one;
    return std::nullopt;
  } else {
    // from_chars takes no '+'; numbers written by other tools may have one.
    if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range)
      return std::string("out of range for ") + dtype_long_name(dtype);
    if (ec == std::errc() && end == s.data() + s.size()) return std::nullopt;
    if constexpr (std::is_integral_v<T>) return "expected an integer";
    return "expected a number";
  }
}

template <class T>
Tensor parse_rows(std::string_view text, const std::string& name, const CsvOptions& o) {
  using Store = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
  std::vector<Store> values;
  std::vector<std::string_view> fields;
  int64_t rows = 0, cols = -1, first_row_line = 0, line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_no <= o.skip_rows || trim(line).empty()) continue;
    split_fields(line, o.delimiter, fields);
    auto found = static_cast<int64_t>(fields.size());
    if (cols < 0) {
      cols = found;
      first_row_line = line_no;
    } else if (found != cols) {
      throw Error(name + ": line " + std::to_string(line_no) + " has " + std::to_string(found) +
                  (found == 1 ? " column" : " columns") + ", expected " + std::to_string(cols) +
                  " (as line " + std::to_string(first_row_line) + ", the first row of data)");
    }
    for (size_t c = 0; c < fields.size(); ++c) {
      Store v{};
      if (auto why = parse_field(fields[c], v, o.dtype))
        throw Error(name + ": line " + std::to_string(line_no) + ", column " +
                    std::to_string(c + 1) + ": cannot read " + quoted(fields[c]) + " as " +
                    dtype_long_name(o.dtype) + " (" + *why + ")");
      values.push_back(v);
    }
    ++rows;
  }
  if (rows == 0)
    throw Error(name + ": no rows of data" +
                (o.skip_rows ? " after skipping " + std::to_string(o.skip_rows) +
                                   (o.skip_rows == 1 ? " line" : " lines")
                             : "") +
                " (expected lines of numbers separated by '" + std::string(1, o.delimiter) + "')");
  auto out = make_dense(TensorType{o.dtype, {rows, cols}, Device()});
  if (!values.empty()) std::memcpy(out->view().data, values.data(), values.size() * sizeof(Store));
  return Tensor(out);
}

}  // namespace

Tensor parse_csv(std::string_view text, const std::string& name, const CsvOptions& o) {
  if (o.skip_rows < 0)
    throw Error(name + ": skip_rows must be non-negative, got " + std::to_string(o.skip_rows));
  check_dtype(o.dtype, (name + ": CsvOptions::dtype").c_str());
  if (o.delimiter == '\n' || o.delimiter == '\r' || o.delimiter == '\0')
    throw Error(name +
                ": the delimiter cannot be a line break or NUL (expected e.g. ',', ';', "
                "'\\t' or ' ')");
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark
  return visit_dtype(o.dtype, [&](auto t) { return parse_rows<decltype(t)>(text, name, o); });
}

Tensor read_csv(const std::string& path, const CsvOptions& o) {
  std::string bytes = io::read_file(path);
  bool gz_name = path.ends_with(".gz");
  if (gz_name && !gzip_magic(bytes, 0))
    throw Error(path +
                ": not gzip data (the name ends in .gz, but the file does not start with "
                "gzip's bytes 1f 8b)");
  if (gz_name || gzip_magic(bytes, 0)) bytes = gunzip(bytes, path);
  return parse_csv(bytes, path, o);
}

}  // namespace kiln::data
