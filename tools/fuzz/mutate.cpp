// Mutation mode (see mutate.h): a corpus of valid inputs from random programs,
// random damage, and the parser or the loader in-process under a watchdog
// thread (time limit) and fatal-signal handlers (crashes), both of which print
// the input that caused them before the process exits.
#include "tools/fuzz/mutate.h"

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "runtime/binary_io.h"
#include "frontend/serialize.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "tools/fuzz/body.h"

namespace kiln::fuzz {

namespace {

constexpr double kMaxRunNumel = 1 << 16;  // larger graphs are not run, only loaded

// What a fatal signal or the watchdog prints: set before each input.
std::string g_report;
const char* g_stage = "";

void on_fatal_signal(int sig) {
  const char head[] = "kiln-fuzz: FAILED: crashed (fatal signal) in ";
  (void)!write(2, head, sizeof head - 1);
  (void)!write(2, g_stage, std::strlen(g_stage));
  (void)!write(2, " on this input:\n", 16);
  (void)!write(2, g_report.data(), g_report.size());
  (void)!write(2, "\n", 1);
  _exit(128 + sig);
}

// Exits the process with a report when an input runs past its deadline.
class Watchdog {
 public:
  explicit Watchdog(double limit_s) : limit_(limit_s), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm() {
    std::lock_guard<std::mutex> lock(m_);
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(limit_));
    armed_ = true;
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard<std::mutex> lock(m_);
    armed_ = false;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
      } else if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ &&
                 std::chrono::steady_clock::now() >= deadline_) {
        std::cerr << "kiln-fuzz: FAILED: " << g_stage << " ran past the time limit of " << limit_
                  << " s on this input:\n"
                  << g_report << std::endl;
        _exit(3);
      }
    }
  }
  double limit_;
  std::mutex m_;
  std::condition_variable cv_;
  bool armed_ = false, stop_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

// ---- mutations ----

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    lines.push_back(s.substr(start, end - start + 1));
    start = end + 1;
  }
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l;
  return s;
}

// [begin, end) of a random run of characters from `set`, or {npos, npos}.
std::pair<size_t, size_t> random_token(Rng& r, const std::string& s, const char* set) {
  for (int tries = 0; tries < 20 && !s.empty(); ++tries) {
    size_t at = static_cast<size_t>(r.below(static_cast<int64_t>(s.size())));
    if (!std::strchr(set, s[at])) continue;
    size_t b = at, e = at;
    while (b > 0 && std::strchr(set, s[b - 1])) --b;
    while (e < s.size() && std::strchr(set, s[e])) ++e;
    return {b, e};
  }
  return {std::string::npos, std::string::npos};
}

void mutate_once(Rng& r, std::string& s) {
  static const char* const kNumbers[] = {
      "-1",     "0",     "99999999999", "9223372036854775807",  "-9223372036854775808", "nan",
      "-inf",   "1e308", "4294967296",  "18446744073709551615", "2147483648",           "-0.0",
      "1e-320", "65536"};
  static const char* const kTokens[] = {
      "%0",     "%99", "=",   ",",     ":", "[",  "]",     "{",      "}",      "f32", "return",
      "update", "sum", "arg", "param", "@", "\"", "cuda:", "index=", "dims=[", "\\x", "//"};
  const int64_t kind = r.below(9);
  if (s.empty()) s = "%";
  const auto pos = [&] { return static_cast<size_t>(r.below(static_cast<int64_t>(s.size()))); };
  switch (kind) {
    case 0:
      s[pos()] ^= static_cast<char>(1 << r.below(8));
      break;
    case 1:
      s.resize(pos());
      break;
    case 2:
    case 3: {
      auto lines = split_lines(s);
      if (lines.empty()) break;
      const size_t i = static_cast<size_t>(r.below(static_cast<int64_t>(lines.size())));
      if (kind == 2)
        lines.insert(
            lines.begin() + static_cast<long>(r.below(static_cast<int64_t>(lines.size()) + 1)),
            lines[i]);
      else
        lines.erase(lines.begin() + static_cast<long>(i));
      s = join_lines(lines);
      break;
    }
    case 4:
    case 5: {
      auto [b, e] = random_token(r, s, "0123456789.-e");
      if (b == std::string::npos) break;
      s.replace(
          b, e - b,
          kind == 4 ? kNumbers[r.below(std::size(kNumbers))] : std::to_string(r.range(-3, 70)));
      break;
    }
    case 6: {
      auto [b, e] = random_token(r, s, "abcdefghijklmnopqrstuvwxyz_%0123456789");
      if (b != std::string::npos) s.erase(b, e - b);
      break;
    }
    case 7:
      s.insert(pos(), kTokens[r.below(std::size(kTokens))]);
      break;
    default:
      s.insert(pos(), 1, static_cast<char>(r.below(256)));
      break;
  }
}

// A saved file whose size field and checksum match its (mutated) bytes, so the
// loader looks past them.
void fix_up_saved(std::string& b) {
  constexpr size_t kSizeAt = 11 + 4;
  if (b.size() < kSizeAt + 8 + 8) return;
  const uint64_t n = b.size();
  for (int i = 0; i < 8; ++i) b[kSizeAt + static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  const uint64_t sum = io::checksum64(b.data(), b.size() - 8);
  for (int i = 0; i < 8; ++i)
    b[b.size() - 8 + static_cast<size_t>(i)] = static_cast<char>(sum >> (8 * i));
}

// Rewrites a saved file's sections (mutating the graph text or a parameter's
// bytes) and re-encodes it with consistent lengths, size and checksum, so that
// the loader gets past the container and reads the damaged content.
void mutate_sections(Rng& r, std::string& b, int64_t n) {
  constexpr size_t kHeader = 11 + 4 + 8 + 4;
  if (b.size() < kHeader + 8) return;
  struct Section {
    std::string tag, payload;
  };
  std::vector<Section> sections;
  size_t at = kHeader;
  const uint64_t count = io::load_le(b.data() + 23, 4);
  for (uint64_t k = 0; k < count; ++k) {
    if (at + 12 > b.size() - 8) return;
    const uint64_t len = io::load_le(b.data() + at + 4, 8);
    if (len > b.size() - 8 - at - 12) return;
    sections.push_back({b.substr(at, 4), b.substr(at + 12, len)});
    at += 12 + len;
  }
  if (sections.empty()) return;
  for (int64_t k = 0; k < n; ++k) {
    Section& s = sections[static_cast<size_t>(r.below(static_cast<int64_t>(sections.size())))];
    if (s.tag == "PARM" && !s.payload.empty() && r.chance(0.5)) {
      // A number in the parameter header: index, name length, dtype, rank, dims, data length.
      const size_t pos = static_cast<size_t>(
          r.below(std::min<int64_t>(static_cast<int64_t>(s.payload.size()), 64)));
      s.payload[pos] = static_cast<char>(r.chance(0.5) ? 0xff : r.below(256));
    } else {
      mutate_once(r, s.payload);
    }
  }
  io::ByteWriter w;
  w.bytes(b.data(), 11);
  w.u32(static_cast<uint32_t>(io::load_le(b.data() + 11, 4)));
  w.u64(0);  // the size, set by fix_up_saved
  w.u32(static_cast<uint32_t>(sections.size()));
  for (const Section& s : sections) {
    w.bytes(s.tag);
    w.u64(s.payload.size());
    w.bytes(s.payload);
  }
  w.u64(0);  // the checksum, likewise
  b = w.str();
  fix_up_saved(b);
}

// ---- the corpus ----

std::vector<std::string> make_corpus(const MutationOptions& o) {
  std::vector<std::string> corpus;
  const std::string path = o.work_dir + "/kiln-fuzz-corpus.kiln";
  for (uint64_t k = 0; corpus.size() < 6 && k < 200; ++k) {
    Program p = generate(o.seed * 1000 + k, kAllFeatures & ~kOptimizer);
    try {
      std::vector<Tensor> caps, args;
      for (const Input& in : p.inputs)
        (in.captured ? caps : args).push_back(make_input(in, p.dtype));
      Body body = [&](const std::vector<Tensor>& a) { return run_body(p, caps, a, nullptr); };
      TracedBody t = traced_body(body, args.size());
      if (o.target == MutationTarget::ir_text) {
        corpus.push_back(print_graph(t.graph(args), PrintOptions{k % 2 == 0}));
      } else {
        t.save(path, args);
        corpus.push_back(io::read_file(path));
      }
    } catch (const Error&) {
      // A program the library cannot trace or save gives no corpus entry.
    }
  }
  std::filesystem::remove(path);
  return corpus;
}

bool small_enough(const Graph& g) {
  for (const Node& n : g.nodes())
    for (const TensorType& t : n.results) {
      double count = 1;
      for (int64_t d : t.shape) count *= static_cast<double>(d);
      if (count > kMaxRunNumel) return false;
    }
  return true;
}

// Runs a loaded function on zeros; returns false when it was too large to run.
bool run_loaded(const LoadedFunction& f) {
  if (!small_enough(f.graph())) return false;
  std::vector<Tensor> args;
  for (const TensorType& t : f.arg_types()) args.push_back(zeros(t.shape, TensorOptions(t.dtype)));
  f(args);
  return true;
}

// True when the arg (or param) nodes' indices are exactly 0..n-1.
bool dense_indices(const Graph& g, const std::vector<NodeId>& ids) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (g.node(ids[i]).attrs.i(AttrKey::index) != static_cast<int64_t>(i)) return false;
  return true;
}

// Parses or loads one input, then runs it when small (throws what they throw).
void feed(bool ir, const std::string& input, const std::string& path, bool skip_sparse,
          MutationSummary& sum) {
  g_stage = ir ? "parse_graph" : "load";
  LoadedFunction f;
  if (ir) {
    Graph g = parse_graph(input, "<mutant>");
    std::vector<Tensor> params;
    const bool small = small_enough(g);
    for (NodeId id : g.params()) {
      const TensorType& t = g.node(id).type();
      params.push_back(small ? zeros(t.shape, TensorOptions(t.dtype)) : Tensor());
    }
    ++sum.accepted;
    if (!small) return;
    if (skip_sparse && !(dense_indices(g, g.args()) && dense_indices(g, g.params()))) return;
    f = LoadedFunction(SavedGraph{g, params, ""}, "<mutant>");
  } else {
    f = load(path);
    ++sum.accepted;
  }
  g_stage = "running the graph";
  sum.ran += run_loaded(f);
}

// Feeds one input under the watchdog; counts and reports the outcome.
void check_input(bool ir, const std::string& input, const std::string& path, int64_t i,
                 Watchdog& watchdog, MutationSummary& sum, const MutationOptions& o,
                 std::ostream& out) {
  if (ir) {
    g_report = input;
  } else {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << input;
    g_report = "(the file " + path + ")";
  }
  ++sum.inputs;
  watchdog.arm();
  try {
    feed(ir, input, path, o.skip_sparse_indices, sum);
  } catch (const Error& e) {
    ++sum.rejected;
    if (o.verbose) out << "input " << i << ": kiln::Error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    ++sum.failed;
    out << "kiln-fuzz: FAILED: input " << i << " raised an exception other than kiln::Error in "
        << g_stage << ": " << e.what() << "\ninput:\n"
        << g_report << "\n";
    if (!ir)
      std::filesystem::copy_file(path, path + ".failed-" + std::to_string(i),
                                 std::filesystem::copy_options::overwrite_existing);
  }
  watchdog.disarm();
}

void install_signal_handlers() {
  for (int sig : {SIGSEGV, SIGABRT, SIGFPE, SIGBUS, SIGILL}) std::signal(sig, on_fatal_signal);
}

}  // namespace

MutationSummary run_mutations(const MutationOptions& o, std::ostream& out) {
  MutationSummary sum;
  const bool ir = o.target == MutationTarget::ir_text;
  const std::vector<std::string> corpus = make_corpus(o);
  KILN_CHECK(!corpus.empty(), "kiln-fuzz: no corpus could be made from seed ", o.seed);
  const std::string path = o.work_dir + "/kiln-fuzz-input.kiln";
  install_signal_handlers();
  Watchdog watchdog(o.time_limit_s);
  Rng r(o.seed);
  for (int64_t i = 0; i < o.inputs; ++i) {
    std::string input = corpus[static_cast<size_t>(r.below(static_cast<int64_t>(corpus.size())))];
    const int64_t n = r.range(1, 3);
    if (ir || r.chance(0.4)) {
      for (int64_t k = 0; k < n; ++k) mutate_once(r, input);
      if (!ir && r.chance(0.7)) fix_up_saved(input);
    } else {
      mutate_sections(r, input, n);
    }
    check_input(ir, input, path, i, watchdog, sum, o, out);
  }
  if (!ir) std::filesystem::remove(path);
  return sum;
}

MutationSummary replay_input(const std::string& file, const MutationOptions& o, std::ostream& out) {
  MutationSummary sum;
  const std::string input = io::read_file(file);
  const bool ir = input.rfind("KILN-GRAPH", 0) != 0;
  install_signal_handlers();
  Watchdog watchdog(o.time_limit_s);
  MutationOptions verbose = o;
  verbose.verbose = true;
  check_input(ir, input, o.work_dir + "/kiln-fuzz-input.kiln", 0, watchdog, sum, verbose, out);
  if (!ir) std::filesystem::remove(o.work_dir + "/kiln-fuzz-input.kiln");
  return sum;
}

}  // namespace kiln::fuzz
