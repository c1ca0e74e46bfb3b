#include "transport/rdma/device.h"

#include <algorithm>

#include "core/env.h"
#include "core/error.h"

namespace ringlet::transport::rdma {
namespace {

struct DeviceSpec {
  std::string name;  // empty: the first hardware device
  int port = 1;
};

DeviceSpec device_spec() {
  DeviceSpec spec;
  const std::string text = core::env_string("RINGLET_IB_DEVICE").value_or("");
  const std::size_t colon = text.find(':');
  spec.name = text.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = text.substr(colon + 1);
    std::size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(port, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    RINGLET_CHECK(!port.empty() && used == port.size() && value >= 1 && value <= 255, ValueError,
                  "RINGLET_IB_DEVICE='", text, "': the port after ':' must be 1..255");
    spec.port = value;
  }
  return spec;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// The device the spec names (its errors propagate), or the first whose port is active; null
// when there is none.
std::unique_ptr<Context> open_hardware(Provider& verbs, const DeviceSpec& spec) {
  const std::vector<std::string> names = verbs.devices();
  if (!spec.name.empty()) {
    if (std::find(names.begin(), names.end(), spec.name) == names.end()) return nullptr;
    return verbs.open(spec.name, spec.port);
  }
  for (const std::string& name : names) {
    try {
      return verbs.open(name, spec.port);
    } catch (const core::DeviceError&) {  // its port is down: the next one
    }
  }
  return nullptr;
}

}  // namespace

RdmaDevice::~RdmaDevice() {
  registrations.reset();  // its regions belong to the context
  context.reset();
}

std::string RdmaDevice::describe() const {
  const PortInfo port = context->port_info();
  if (context->emulated()) {
    return core::str(context->device_name(), " port ", context->port(),
                     " (emulated provider: ranks of one host only)");
  }
  return core::str(context->device_name(), " port ", context->port(), " (",
                   port.link_layer == LinkLayer::ethernet ? "RoCE" : "InfiniBand", ", GID index ",
                   gid_index, ")");
}

std::string hardware_rdma_device() {
  const DeviceSpec spec = device_spec();
  Provider* verbs = ibverbs_provider();
  if (spec.name == "emu0" || verbs == nullptr) return "";
  try {
    const std::unique_ptr<Context> context = open_hardware(*verbs, spec);
    if (!context) return "";
    const bool ethernet = context->port_info().link_layer == LinkLayer::ethernet;
    return context->device_name() + (ethernet ? " roce" : " infiniband");
  } catch (const core::Error&) {
    return "";
  }
}

std::unique_ptr<RdmaDevice> open_rdma_device() {
  const DeviceSpec spec = device_spec();
  auto device = std::make_unique<RdmaDevice>();
  if (spec.name == "emu0") {
    device->context = emulated_provider().open("emu0", spec.port);
  } else {
    Provider* verbs = ibverbs_provider();
    RINGLET_CHECK(verbs != nullptr, NotBuiltError,
                  "rdma: this build has no libibverbs (meson -Drdma=enabled needs libibverbs-dev); "
                  "RINGLET_IB_DEVICE=emu0 runs the emulated device");
    device->context = open_hardware(*verbs, spec);
    RINGLET_CHECK(device->context != nullptr, DeviceError, "rdma: ",
                  spec.name.empty() ? std::string("no RDMA device with an active port")
                                    : "no RDMA device '" + spec.name + "'",
                  " (libibverbs lists: ", joined(verbs->devices()),
                  "); RINGLET_IB_DEVICE=emu0 runs the emulated device, RINGLET_TRANSPORT=tcp "
                  "avoids rdma");
  }
  const auto gid = core::env_int("RINGLET_IB_GID_INDEX", -1, -1, 255);
  device->gid_index = gid >= 0 ? static_cast<int>(gid) : device->context->default_gid_index();
  device->context->gid(device->gid_index);  // a bad index fails here, naming it
  device->registrations = std::make_unique<RegistrationCache>(*device->context);
  return device;
}

}  // namespace ringlet::transport::rdma
