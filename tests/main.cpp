// The doctest main shared by every test binary. The suites run with the
// verifier after every graph pass (KILN_VERIFY, passes/pipeline.h), as debug
// builds do; tests/CMakeLists.txt sets it for the other tests too.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("KILN_VERIFY", "1", /*overwrite=*/0);
  return doctest::Context(argc, argv).run();
}
