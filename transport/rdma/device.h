// RdmaDevice: the device a process's rdma connections use, chosen as NCCL chooses its HCA:
//   RINGLET_IB_DEVICE     "NAME" or "NAME:PORT" (as NCCL_IB_HCA names one); default the first
//                         libibverbs device whose port (1 unless named) is active. "emu0" is the
//                         emulated device (transport/rdma/emulated.cpp): ranks of one host only.
//   RINGLET_IB_GID_INDEX  the GID index (as NCCL_IB_GID_INDEX); default: the provider's choice
//                         (RoCE v2 with an IPv4-mapped address on RoCE, 0 on InfiniBand).
#pragma once

#include <memory>
#include <string>

#include "transport/rdma/registration_cache.h"
#include "transport/rdma/verbs.h"

namespace ringlet::transport::rdma {

struct RdmaDevice {
  std::unique_ptr<Context> context;
  std::unique_ptr<RegistrationCache> registrations;
  int gid_index = 0;
  // "mlx5_0 port 1 (RoCE, GID index 3)" or "emu0 port 1 (emulated)".
  std::string describe() const;
  ~RdmaDevice();
};

// Opens the device the settings name. Throws DeviceError saying what was looked for and what
// exists when there is none (e.g. no RDMA hardware and no RINGLET_IB_DEVICE=emu0), NotBuiltError
// when a libibverbs device is named in a build without libibverbs.
std::unique_ptr<RdmaDevice> open_rdma_device();

// "NAME roce" or "NAME infiniband" for the hardware device open_rdma_device would take, or ""
// when there is none (the emulated device does not count: it cannot reach another host). For
// choosing rdma between hosts under RINGLET_TRANSPORT=auto: both ends need the same link layer.
std::string hardware_rdma_device();

}  // namespace ringlet::transport::rdma
