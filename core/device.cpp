// Device names: printing and parsing "kind[:index]".
#include "core/device.h"

#include <charconv>

#include "core/error.h"

namespace ringlet::core {

std::string Device::str() const {
  switch (kind) {
    case Kind::cpu: return "cpu";
    case Kind::cuda: return "cuda:" + std::to_string(index);
    case Kind::emu: return "emu:" + std::to_string(index);
  }
  return "?";
}

Device parse_device(std::string_view text) {
  const auto fail = [&]() -> Device {
    RINGLET_THROW(ValueError, "unknown device '", text,
                  "' (valid: cpu, cuda, cuda:N, emu, emu:N with N a device number)");
  };
  const std::size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  int index = 0;
  if (colon != std::string_view::npos) {
    const std::string_view digits = text.substr(colon + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || index < 0 ||
        name == "cpu")
      return fail();
  }
  if (name == "cpu") return Device::cpu();
  if (name == "cuda") return Device::cuda(index);
  if (name == "emu") return Device::emu(index);
  return fail();
}

}  // namespace ringlet::core
