// The entry-point table template (runtime/dl_table.h) that the CUDA driver,
// cuBLAS and NCCL loaders share, and the BLAS layout rule OpenBLAS and cuBLAS
// share (runtime/blas_layout.h).
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "runtime/blas_layout.h"
#include "runtime/dl_table.h"

// Two functions to take entry points of, one of them renamed by a macro as
// cuda.h and cublas_v2.h rename theirs (cuMemAlloc -> cuMemAlloc_v2).
extern "C" int kiln_dl_test_add(int a, int b) {
  return a + b;
}
extern "C" double kiln_dl_test_scale_v2(double x) {
  return 2 * x;
}
#define kiln_dl_test_scale kiln_dl_test_scale_v2

namespace {

#define KILN_DL_TEST_FUNCTIONS(X) \
  X(kiln_dl_test_add)             \
  X(kiln_dl_test_scale)
KILN_DL_TABLE(AsWritten, KILN_DL_TEST_FUNCTIONS, KILN_DL_AS_WRITTEN);
KILN_DL_TABLE(AsExported, KILN_DL_TEST_FUNCTIONS, KILN_DL_AS_EXPORTED);

// A resolver over a map, as cuGetProcAddress or dlsym would be.
struct MapResolver {
  std::map<std::string, void*> symbols;
  void* operator()(const char* key) const {
    auto it = symbols.find(key);
    return it == symbols.end() ? nullptr : it->second;
  }
};

}  // namespace

using namespace kiln;

TEST_CASE("an entry-point table: typed slots, keys as written or as exported") {
  CHECK(AsWritten::size == 2);
  CHECK(std::string(AsWritten::keys[1]) == "kiln_dl_test_scale");
  CHECK(std::string(AsExported::keys[1]) == "kiln_dl_test_scale_v2");

  AsExported t;
  MapResolver r{{{"kiln_dl_test_add", reinterpret_cast<void*>(&kiln_dl_test_add)},
                 {"kiln_dl_test_scale_v2", reinterpret_cast<void*>(&kiln_dl_test_scale_v2)}}};
  CHECK(dl::resolve(t, "libtest.so", r) == "");
  // The slots are typed by the declarations: called like the functions.
  CHECK(t.kiln_dl_test_add(2, 3) == 5);
  CHECK(t.kiln_dl_test_scale(1.5) == 3.0);
  for (const auto& e : dl::entry_points(t)) CHECK_MESSAGE(e.resolved, e.name);
}

TEST_CASE(
    "an entry point the library lacks is named with the library; the ones after it stay null") {
  AsWritten t;
  MapResolver r{{{"kiln_dl_test_add", reinterpret_cast<void*>(&kiln_dl_test_add)},
                 {"kiln_dl_test_scale_v2", reinterpret_cast<void*>(&kiln_dl_test_scale_v2)}}};
  // Looked up as written, the renamed function is not found under its exported name.
  CHECK(dl::resolve(t, "libtest.so", r) == "libtest.so has no kiln_dl_test_scale (needed by Kiln)");
  std::vector<dl::EntryPoint> e = dl::entry_points(t);
  REQUIRE(e.size() == 2);
  CHECK(e[0].resolved);
  CHECK_FALSE(e[1].resolved);

  AsExported first_missing;
  CHECK(dl::resolve(first_missing, "libtest.so", MapResolver{}) ==
        "libtest.so has no kiln_dl_test_add (needed by Kiln)");
  for (const auto& p : dl::entry_points(first_missing)) CHECK_FALSE(p.resolved);
}

TEST_CASE("dl::open: a library that is absent, one found in a fallback folder, dlsym through it") {
  dl::Library none = dl::open("libkiln_no_such_library.so.1", {"", "/nonexistent"});
  CHECK(none.handle == nullptr);
  CHECK(none.error.find("libkiln_no_such_library.so.1 could not be loaded (dlopen: ") == 0);

  dl::Library libm = dl::open("libm.so.6");
  REQUIRE_MESSAGE(libm.handle != nullptr, libm.error);
  CHECK(libm.path == "libm.so.6");
  CHECK(dl::symbol(libm.handle, "cos") != nullptr);
  CHECK(dl::symbol(libm.handle, "kiln_dl_test_add") == nullptr);
  CHECK(dl::symbol(nullptr, "cos") == nullptr);
  AsExported t;
  CHECK(dl::resolve(t, libm.path, libm.handle) ==
        "libm.so.6 has no kiln_dl_test_add (needed by Kiln)");
}

TEST_CASE("blas_layout: row-major, transposed, single rows and columns, and what must be copied") {
  auto layout = [](int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    return blas_layout(MatrixStrides{rows, cols, rs, cs});
  };
  // Dense row-major, and row-major with padded rows.
  auto l = layout(3, 4, 4, 1);
  REQUIRE(l);
  CHECK_FALSE(l->trans);
  CHECK(l->ld == 4);
  l = layout(3, 4, 10, 1);
  REQUIRE(l);
  CHECK(l->ld == 10);
  // The transpose of a row-major matrix (x.t()): strides (1, rows).
  l = layout(4, 3, 1, 4);
  REQUIRE(l);
  CHECK(l->trans);
  CHECK(l->ld == 4);
  // One row: any row stride; one column: any column stride.
  l = layout(1, 5, 123, 1);
  REQUIRE(l);
  CHECK_FALSE(l->trans);
  CHECK(l->ld == 5);
  l = layout(5, 1, 7, 99);
  REQUIRE(l);
  CHECK_FALSE(l->trans);
  CHECK(l->ld == 7);
  // Rows that overlap, and no unit stride at all: copied first.
  CHECK_FALSE(layout(3, 4, 2, 1));
  CHECK_FALSE(layout(3, 4, 8, 2));
}
