// The notes: two thread-local pointers (the names outlive their use: string literals, and a
// node's name while the node runs).
#include "device/op_context.h"

namespace ringlet::device {
namespace {

thread_local const char* t_forward = nullptr;
thread_local const std::string* t_backward = nullptr;

}  // namespace

std::string current_op() {
  if (t_backward != nullptr) return *t_backward + "'s backward";
  if (t_forward != nullptr) return std::string("the op after ") + t_forward;
  return "no op yet";
}

namespace detail {
void note_forward_op(const char* name) { t_forward = name; }
void note_backward_op(const std::string* node_name) { t_backward = node_name; }
}  // namespace detail

}  // namespace ringlet::device
