// StagingPool: see staging_pool.h.
#include "staging_pool.h"

#include <cstdlib>
#include <new>

namespace ringlet::torch_backend {
namespace {

constexpr std::size_t kPage = 4096;

std::size_t round_up(std::size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

}  // namespace

StagingPool::State::~State() {
  for (auto& [bytes, block] : free) std::free(block);
}

at::Tensor StagingPool::empty(at::IntArrayRef sizes, at::ScalarType type) {
  std::size_t count = 1;
  for (auto s : sizes) count *= static_cast<std::size_t>(s);
  const std::size_t bytes = round_up(std::max<std::size_t>(count * c10::elementSize(type), 1));
  char* block = nullptr;
  std::size_t block_bytes = bytes;
  {
    std::lock_guard lock(state_->mutex);
    // The smallest free block that fits and wastes at most half of itself.
    auto it = state_->free.lower_bound(bytes);
    if (it != state_->free.end() && it->first <= 2 * bytes) {
      block_bytes = it->first;
      block = it->second;
      state_->free_bytes -= block_bytes;
      state_->free.erase(it);
    }
  }
  if (block == nullptr) {
    block = static_cast<char*>(std::aligned_alloc(kPage, block_bytes));
    if (block == nullptr) throw std::bad_alloc();
  }
  std::weak_ptr<State> pool = state_;
  auto give_back = [pool, block, block_bytes](void*) {
    auto state = pool.lock();
    if (!state) {
      std::free(block);
      return;
    }
    std::lock_guard lock(state->mutex);
    state->free.emplace(block_bytes, block);
    state->free_bytes += block_bytes;
    while (state->free_bytes > kKeptBytes) {  // the largest blocks go first
      auto largest = std::prev(state->free.end());
      state->free_bytes -= largest->first;
      std::free(largest->second);
      state->free.erase(largest);
    }
  };
  return at::from_blob(block, sizes, give_back, at::TensorOptions().dtype(type));
}

}  // namespace ringlet::torch_backend
