// Fiber: a function run on a stack of its own, switched to and from explicitly on one thread
// (ucontext): the simulated network's rank programs, thousands of them, where a thread each
// would cost a kernel context switch per message. The sanitizers (ASan, TSan) are told of every
// switch. A fiber's body must catch its exceptions; when it returns, the fiber switches to the
// one it was made to return to, for good.
#pragma once

#include <setjmp.h>
#include <ucontext.h>

#include <cstddef>
#include <functional>

namespace ringlet::model {

class Fiber {
 public:
  Fiber();  // the calling thread's own stack, to switch from and back to
  Fiber(std::function<void()> body, std::size_t stack_bytes, Fiber& return_to);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // From this fiber, which runs now, to `next`; returns when something switches back here.
  void switch_to(Fiber& next);
  bool finished() const { return finished_; }

 private:
  static void entry(unsigned high, unsigned low);
  void before_switch(Fiber& next, bool leaving_for_good);
  void after_switch();

  ucontext_t context_{};   // how it starts (and, under a sanitizer, every switch)
  jmp_buf jump_{};         // where it left off, once started
  bool started_ = false;   // the thread's own: running from the start
  char* stack_ = nullptr;  // with a guard page below it; null for the thread's own
  std::size_t stack_bytes_ = 0;
  std::function<void()> body_;
  Fiber* return_to_ = nullptr;
  bool finished_ = false;
  void* tsan_fiber_ = nullptr;
  void* asan_fake_stack_ = nullptr;
  const void* asan_bottom_ = nullptr;  // the stack's, for ASan (learnt for the thread's own)
  std::size_t asan_size_ = 0;
};

}  // namespace ringlet::model
