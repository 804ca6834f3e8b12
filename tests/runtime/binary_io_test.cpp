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

TEST_CASE("InputFile reads parts, checked against the size it had when opened (#32.8)") {
  char tmpl[] = "/tmp/kiln-io-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string file = dir + "/data.bin";
  std::ofstream(file, std::ios::binary) << "0123456789";
  io::InputFile f(file);
  CHECK(f.size() == 10);
  CHECK(f.read(2, 3) == "234");
  CHECK(f.read(8, 100) == "89");  // cut at the end
  CHECK(f.read(20, 5).empty());
  char buf[4] = {};
  f.read_into(6, buf, 4);
  CHECK(std::string(buf, 4) == "6789");
  std::filesystem::resize_file(file, 5);  // another process shortens it
  try {
    f.read_into(3, buf, 4);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find(file + ": the file ended at byte 5 while it was read") == 0);
  }
  // More than the machine could hold is an error before any allocation.
  std::filesystem::resize_file(file, uint64_t(1) << 43);  // 8 TiB, a hole
  io::InputFile huge(file);
  try {
    (void)huge.read(0, huge.size());
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("out of CPU memory: reading " + file + " needs") == 0);
  }
  CHECK(message_of(file).find("out of CPU memory: reading " + file) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("write_file_durable replaces a regular file or makes a new one, nothing else (#32.10)") {
  char tmpl[] = "/tmp/kiln-io-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  auto write_error = [](const std::string& path) {
    try {
      io::write_file_durable(path, "bytes");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string fifo = dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(write_error(fifo) == fifo +
                                 ": is a FIFO; only a regular file is replaced (expected a "
                                 "regular file or a new path)");
  CHECK(write_error("/dev/null") ==
        "/dev/null: is a character device; only a regular file is "
        "replaced (expected a regular file or a new path)");
  CHECK(write_error(dir) == dir +
                                ": is a directory; only a regular file is replaced (expected a "
                                "regular file or a new path)");
  CHECK_THROWS_AS(io::check_write_target(fifo), Error);
  CHECK_NOTHROW(io::check_write_target(dir + "/new"));
  CHECK(write_error(dir + "/a/b/new.bin").empty());  // parents made
  CHECK(io::read_file(dir + "/a/b/new.bin") == "bytes");
  std::filesystem::remove_all(dir);
}
