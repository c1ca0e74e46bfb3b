// Which device a rank computes on: the placement `ringlet train`, train_bench and the collective
// benchmarks share.
#pragma once

#include <string>

#include "core/device.h"
#include "transport/discovery.h"

namespace ringlet::distributed {

// The device this rank computes on for a --device of `text`: as given when it names an index
// ("emu:1"); otherwise ("cuda", "emu") device local_rank % the devices of that kind, so N local
// ranks spread over the devices, several per device when there are fewer devices than ranks.
core::Device rank_device(const std::string& text, const transport::InitInfo& info);

}  // namespace ringlet::distributed
