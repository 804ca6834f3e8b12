// Devices a tensor or graph value can live on.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

enum class DeviceType : uint8_t { CPU, CUDA };

inline constexpr DeviceType kCPU = DeviceType::CPU;
inline constexpr DeviceType kCUDA = DeviceType::CUDA;

struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = 0;

  Device() = default;
  Device(DeviceType type, int index = 0) : type(type), index(static_cast<int8_t>(index)) {}
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  /// "cpu" or "cuda:0".
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace kiln
