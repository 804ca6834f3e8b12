// Devices a tensor or graph value can live on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

enum class DeviceType : uint8_t { CPU, CUDA };

inline constexpr DeviceType kCPU = DeviceType::CPU;
inline constexpr DeviceType kCUDA = DeviceType::CUDA;

struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = 0;

  Device() = default;
  Device(DeviceType type, int index = 0) : type(type), index(static_cast<int8_t>(index)) {}
  /// From libtorch's spellings: "cpu", "cuda" (device 0) or "cuda:<index>".
  /// Throws kiln::Error naming the string otherwise.
  Device(std::string_view s);            // NOLINT: implicit, as libtorch's
  Device(const char* s) : Device(std::string_view(s)) {}        // NOLINT
  Device(const std::string& s) : Device(std::string_view(s)) {}  // NOLINT
  /// The device Device::str() writes ("cpu" or "cuda:<index>", index 0..127,
  /// no leading zeros), or nullopt: the strict form files are read in.
  static std::optional<Device> parse(std::string_view s);
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  /// "cpu" or "cuda:0".
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace kiln
