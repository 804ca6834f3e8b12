// Devices a tensor or graph value can live on.
#include "ir/device.h"

namespace kiln {

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  return "cuda:" + std::to_string(index);
}

}  // namespace kiln
