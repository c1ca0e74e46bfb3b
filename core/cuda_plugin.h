// The CUDA half of ringlet (its runtime, kernels, cuBLAS and cuDNN calls, the collectives'
// reduction kernels) is a plugin, libringlet-cuda.so, loaded on the first call that needs a GPU.
// libringlet.so and ringlet's programs have no link-time dependency on the CUDA runtime or cuBLAS:
// they start, and run CPU and emulated-device work, on a machine without CUDA, as they do where
// cuDNN alone is missing. Only the plugin depends on libcudart and libcublas.
//
// Where it is looked for, in order: $RINGLET_CUDA_PLUGIN (a path, and only it); then, from the
// directory D of the shared object or program holding this code, the installed layout
// (D/ringlet/ for libringlet.so in <libdir>, D/../<libdir>/ringlet/ for a program in <bindir>)
// and the build tree's root (D, D/.., D/../..: its programs lie 0-2 folders below it, wherever the
// tree was moved). Loaded once, RTLD_NOW | RTLD_LOCAL: it exports only its `ringlet_cuda_*`
// entry points and binds to ringlet's own functions in the program that loads it (libringlet.so
// exports them; the build tree's programs are linked with -rdynamic).
#pragma once

#include <string>

// Marks a plugin entry point: the one kind of name the plugin exports.
#define RINGLET_CUDA_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace ringlet::core {

// "" when the plugin is loaded, else why not: the paths tried and the loader's own words (e.g.
// "libcudart.so.13: cannot open shared object file"), or that this build has no CUDA.
const std::string& cuda_plugin_unavailable();

// The plugin's entry point `name`, loading the plugin on first use. Throws DeviceError saying
// why when it cannot be loaded or lacks `name`.
void* cuda_plugin_symbol(const char* name);

template <class Fn>
Fn* cuda_plugin_function(const char* name) {
  return reinterpret_cast<Fn*>(cuda_plugin_symbol(name));
}

}  // namespace ringlet::core
