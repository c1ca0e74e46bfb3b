// Which op the calling thread is in, for errors raised far below it (a graph capture refusing a
// host read, a new allocation or a host function names the op that asked): record() notes each
// forward op as it finishes, and the autograd engine each backward node while it runs.
#pragma once

#include <string>

namespace ringlet::device {

// "conv2d's backward", "the op after linear", or "no op yet" (this thread's).
std::string current_op();

namespace detail {
void note_forward_op(const char* name);               // record(): the op just finished
void note_backward_op(const std::string* node_name);  // the engine: null when the node is done
}  // namespace detail

}  // namespace ringlet::device
