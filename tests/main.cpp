// The doctest main shared by every test binary. The suites run with the
// verifier after every graph pass (KILN_VERIFY, passes/pipeline.h), as debug
// builds do, and compile every new size of a traced function at its first call
// (KILN_COMPILE_AFTER=0: a test at several sizes compares a plan at each; the
// tests of compile_after set it themselves); tests/CMakeLists.txt sets both for
// the other tests too.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>

namespace {

// Set before any other static of the binary is made: some test files make
// tensors at namespace scope, which reads the settings.
struct TestEnvironment {
  TestEnvironment() {
    setenv("KILN_VERIFY", "1", /*overwrite=*/0);
    setenv("KILN_COMPILE_AFTER", "0", /*overwrite=*/0);
  }
};
__attribute__((init_priority(101))) const TestEnvironment environment;

}  // namespace

int main(int argc, char** argv) {
  return doctest::Context(argc, argv).run();
}
