// Tables of entry points into libraries loaded at run time (dlopen): the CUDA
// driver, cuBLAS and cuBLASLt, NCCL (DESIGN.md: every binary starts on a
// machine without them). One X-macro lists the functions Kiln calls from a
// library; KILN_DL_TABLE turns it into a struct of slots, each typed by the
// function's declaration, with the key each is looked up by; dl::resolve fills
// the slots through a resolver (dlsym, or the driver's cuGetProcAddress) and
// names the library and the missing symbol when one is absent. No library's
// header is included here: a table is declared in the .cpp that includes it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

/// Keys for KILN_DL_TABLE: a function's name as the list spells it ("cuMemAlloc",
/// what cuGetProcAddress takes), or the symbol the library exports, after the
/// header's renaming macros ("cublasCreate" -> "cublasCreate_v2", what dlsym takes).
#define KILN_DL_AS_WRITTEN(fn) #fn,
#define KILN_DL_AS_EXPORTED(fn) KILN_DL_STRINGIZE(fn),
#define KILN_DL_STRINGIZE(x) #x
#define KILN_DL_SLOT(fn) decltype(&::fn) fn = nullptr;

/// KILN_DL_TABLE(Table, LIST, KEY) declares `struct Table` with one slot per
/// function of the X-macro LIST (`X(cuInit) X(cuMemAlloc) ...`), named and typed
/// as the header declares it, and `Table::keys`, each slot's key (KEY is
/// KILN_DL_AS_WRITTEN or KILN_DL_AS_EXPORTED).
#define KILN_DL_TABLE(Table, LIST, KEY)                          \
  struct Table {                                                 \
    LIST(KILN_DL_SLOT)                                           \
    static constexpr const char* keys[] = {LIST(KEY)};           \
    static constexpr size_t size = sizeof(keys) / sizeof(*keys); \
  }

namespace kiln::dl {

/// One entry of a table, for tests and diagnostics.
struct EntryPoint {
  const char* name;  // the key it is looked up by (Table::keys)
  bool resolved;     // false when the library is not loaded or lacks it
};

/// A library opened with dlopen: its handle and the path that opened it, or
/// why it could not be opened.
struct Library {
  void* handle = nullptr;
  std::string path;
  std::string error;  // "<name> could not be loaded (dlopen: <why>)" when handle is null
};

/// dlopen(name) (RTLD_NOW, with RTLD_GLOBAL when `global`, else RTLD_LOCAL);
/// when that fails and `name` is a bare file name, `name` in each of `dirs`
/// ("" skipped). The error quotes the first attempt's dlerror.
Library open(const std::string& name, const std::vector<std::string>& dirs = {},
             bool global = false);

/// dlsym(handle, symbol), or null.
void* symbol(void* handle, const char* symbol);

/// "<library> has no <key> (needed by Kiln)": the one message for a missing entry point.
std::string missing(const std::string& library, const char* key);

/// Fills every slot of `table`, in list order, with resolve(key) (a function
/// pointer or null). Returns "" when all resolve, else missing(library, key) for
/// the first key that does not (that slot and the ones after it stay null).
template <class Table, class Resolver>
std::string resolve(Table& table, const std::string& library, Resolver&& resolve) {
  static_assert(sizeof(Table) == Table::size * sizeof(void*), "one slot per key");
  void** slots = reinterpret_cast<void**>(&table);
  for (size_t i = 0; i < Table::size; ++i) {
    slots[i] = resolve(Table::keys[i]);
    if (!slots[i]) return missing(library, Table::keys[i]);
  }
  return {};
}

/// Fills `table` from the symbols of `handle` (dlsym over Table::keys).
template <class Table>
std::string resolve(Table& table, const std::string& library, void* handle) {
  return resolve(table, library, [handle](const char* key) { return symbol(handle, key); });
}

/// Every entry of `table`, in list order, and whether it resolved.
template <class Table>
std::vector<EntryPoint> entry_points(const Table& table) {
  auto slots = reinterpret_cast<void* const*>(&table);
  std::vector<EntryPoint> out;
  for (size_t i = 0; i < Table::size; ++i) out.push_back({Table::keys[i], slots[i] != nullptr});
  return out;
}

}  // namespace kiln::dl
