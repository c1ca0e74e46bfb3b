// A name for the calling thread, as the kernel keeps it (/proc/<pid>/task/<tid>/comm) and as
// debuggers, `ps -L`, `top -H` and py-spy show it: each thread ringlet starts names itself
// "rl-<role>", so that a stuck process says which of its threads is where (a progress thread,
// the device watchdog, a transport's sender) without symbols.
#pragma once

#include <string>

namespace ringlet::core {

// Names the calling thread `name`, cut to the kernel's 15 characters. Best effort: a platform
// without thread names leaves it as it was.
void name_this_thread(const std::string& name);

// The calling thread's name ("" where the platform keeps none).
std::string this_thread_name();

}  // namespace ringlet::core
