// Devices a tensor or graph value can live on.
#include "ir/device.h"

#include "ir/error.h"

namespace kiln {

std::optional<Device> Device::parse(std::string_view s) {
  if (s == "cpu") return Device(kCPU);
  if (!s.starts_with("cuda:") || s.size() == 5 || s.size() > 8) return std::nullopt;
  int index = 0;
  for (char c : s.substr(5)) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + (c - '0');
  }
  if (index > 127 || Device(kCUDA, index).str() != s) return std::nullopt;
  return Device(kCUDA, index);
}

Device::Device(std::string_view s) {
  std::optional<Device> d = s == "cuda" ? Device(kCUDA) : parse(s);
  if (!d)
    throw Error("Device: expected \"cpu\", \"cuda\" or \"cuda:<index>\" (index 0..127), got \"" +
                std::string(s) + "\"");
  *this = *d;
}

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  return "cuda:" + std::to_string(index);
}

}  // namespace kiln
