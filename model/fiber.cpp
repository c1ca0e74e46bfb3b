// Fibers on ucontext, with the sanitizers' fiber annotations. A fiber starts with setcontext;
// after that, switches are _setjmp / _longjmp, which unlike swapcontext leave the signal mask
// alone and so make no system call (a third of a simulation's time went to swapcontext's). Under
// a sanitizer they are swapcontext, which the sanitizers' fiber support is written for.
// _FORTIFY_SOURCE's longjmp check would take a jump to another stack for a corrupt one.
#undef _FORTIFY_SOURCE
#include "model/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RINGLET_FIBER_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define RINGLET_FIBER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define RINGLET_FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define RINGLET_FIBER_TSAN 1
#endif

#if defined(RINGLET_FIBER_ASAN) || defined(RINGLET_FIBER_TSAN)
#define RINGLET_FIBER_SWAPCONTEXT 1
#endif

#ifdef RINGLET_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#endif
#ifdef RINGLET_FIBER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace ringlet::model {

Fiber::Fiber() : started_(true) {
#ifdef RINGLET_FIBER_TSAN
  tsan_fiber_ = __tsan_get_current_fiber();
#endif
}

Fiber::Fiber(std::function<void()> body, std::size_t stack_bytes, Fiber& return_to)
    : body_(std::move(body)), return_to_(&return_to) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  void* p = mmap(nullptr, stack_bytes_ + page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  RINGLET_CHECK(p != MAP_FAILED, OutOfMemoryError, "fiber: cannot map a stack of ", stack_bytes_,
                " bytes");
  mprotect(p, page, PROT_NONE);  // an overflow faults instead of writing over the next stack
  stack_ = static_cast<char*>(p);
  getcontext(&context_);
  context_.uc_stack.ss_sp = stack_ + page;
  context_.uc_stack.ss_size = stack_bytes_;
  context_.uc_link = nullptr;
  const auto self = reinterpret_cast<std::uintptr_t>(this);
  makecontext(&context_, reinterpret_cast<void (*)()>(&Fiber::entry), 2,
              static_cast<unsigned>(self >> 32), static_cast<unsigned>(self & 0xffffffffu));
  asan_bottom_ = stack_ + page;
  asan_size_ = stack_bytes_;
#ifdef RINGLET_FIBER_TSAN
  tsan_fiber_ = __tsan_create_fiber(0);
#endif
}

Fiber::~Fiber() {
#ifdef RINGLET_FIBER_TSAN
  if (stack_ != nullptr) __tsan_destroy_fiber(tsan_fiber_);
#endif
  if (stack_ != nullptr) {
    munmap(stack_, stack_bytes_ + static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  }
}

void Fiber::before_switch([[maybe_unused]] Fiber& next, [[maybe_unused]] bool leaving_for_good) {
#ifdef RINGLET_FIBER_TSAN
  __tsan_switch_to_fiber(next.tsan_fiber_, 0);
#endif
#ifdef RINGLET_FIBER_ASAN
  __sanitizer_start_switch_fiber(leaving_for_good ? nullptr : &asan_fake_stack_, next.asan_bottom_,
                                 next.asan_size_);
#endif
}

void Fiber::after_switch() {
#ifdef RINGLET_FIBER_ASAN
  // Whoever switched here: learn the thread's own stack the first time it is left.
  const void* from_bottom = nullptr;
  std::size_t from_size = 0;
  __sanitizer_finish_switch_fiber(asan_fake_stack_, &from_bottom, &from_size);
  if (return_to_ != nullptr && return_to_->asan_bottom_ == nullptr) {
    return_to_->asan_bottom_ = from_bottom;
    return_to_->asan_size_ = from_size;
  }
#endif
}

void Fiber::switch_to(Fiber& next) {
  before_switch(next, false);
#ifdef RINGLET_FIBER_SWAPCONTEXT
  swapcontext(&context_, &next.context_);
#else
  if (_setjmp(jump_) == 0) {
    if (!next.started_) {
      next.started_ = true;
      setcontext(&next.context_);
    }
    _longjmp(next.jump_, 1);
  }
#endif
  after_switch();
}

void Fiber::entry(unsigned high, unsigned low) {
  auto* self = reinterpret_cast<Fiber*>((static_cast<std::uintptr_t>(high) << 32) | low);
  self->after_switch();
  self->body_();  // catches its own exceptions (see fiber.h)
  self->finished_ = true;
  self->before_switch(*self->return_to_, true);
#ifdef RINGLET_FIBER_SWAPCONTEXT
  setcontext(&self->return_to_->context_);
#else
  _longjmp(self->return_to_->jump_, 1);
#endif
  std::fprintf(stderr, "ringlet: a fiber could not switch back\n");
  std::abort();
}

}  // namespace ringlet::model
