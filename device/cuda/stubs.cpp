// Linked instead of the CUDA runtime when ringlet is built without CUDA: built_with_cuda() is
// false and the rest throws NotBuiltError, so callers need no #ifdef.
#include "core/error.h"
#include "device/cuda/device_runtime.h"

namespace ringlet::device::cuda {
namespace {
[[noreturn]] void not_built(const char* what) {
  RINGLET_THROW(NotBuiltError, what, ": ringlet was built without CUDA (meson -Dcuda=enabled)");
}
}  // namespace

bool built_with_cuda() { return false; }
int device_count() { not_built("cuda::device_count"); }
Runtime& device_runtime(int) { not_built("cuda::device_runtime"); }

}  // namespace ringlet::device::cuda
