// The one checked file reader: regular files only, so a device, a FIFO or a
// directory is a clear error instead of a hang or an endless read.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ir/error.h"
#include "runtime/binary_io.h"

using namespace kiln;

namespace {

std::string message_of(const std::string& path) {
  try {
    (void)io::read_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("read_file reads regular files and refuses everything else") {
  char tmpl[] = "/tmp/kiln-io-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string file = dir + "/data.bin";
  const std::string bytes("abc\0def", 7);
  std::ofstream(file, std::ios::binary) << bytes;
  CHECK(io::read_file(file) == bytes);

  CHECK(message_of("/dev/zero") == "/dev/zero: is a character device (expected a regular file)");
  CHECK(message_of(dir) == dir + ": is a directory (expected a regular file)");
  const std::string fifo = dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(message_of(fifo) == fifo + ": is a FIFO (expected a regular file)");
  CHECK(message_of(dir + "/missing").find(dir + "/missing: cannot open (No such file") == 0);
  std::filesystem::remove_all(dir);
}
