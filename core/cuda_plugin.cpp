#include "core/cuda_plugin.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"

#ifndef RINGLET_CUDA_PLUGIN_LIBDIR
#define RINGLET_CUDA_PLUGIN_LIBDIR ""  // a build without CUDA has no plugin
#endif

namespace ringlet::core {
namespace {

constexpr const char* kPluginFile = "libringlet-cuda.so";

struct Plugin {
  void* handle = nullptr;
  std::string unavailable;  // "" once loaded
};

// The directory of the shared object or program this function was linked into, symbolic links
// resolved. The loader names a program as it was started (possibly relative to the directory it
// started in): /proc/self/exe answers when that name no longer leads to a file.
std::string own_directory() {
  namespace fs = std::filesystem;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_directory), &info) == 0 || info.dli_fname == nullptr)
    return "";
  std::error_code error;
  fs::path path = fs::absolute(info.dli_fname, error);
  if (error || !fs::exists(path, error)) path = "/proc/self/exe";
  path = fs::weakly_canonical(path, error);
  return error ? "" : path.parent_path().string();
}

// See core/cuda_plugin.h: the installed layout from a library in <libdir> or a program in
// <bindir>, then the build tree's root, 0-2 folders above its programs, wherever it was moved.
std::vector<std::string> candidate_paths() {
  if (const char* forced = std::getenv("RINGLET_CUDA_PLUGIN"); forced != nullptr && *forced)
    return {forced};  // as asked, and nothing else
  const std::string dir = own_directory();
  if (dir.empty()) return {};
  std::vector<std::string> paths;
  for (const std::string& relative :
       {str("ringlet/", kPluginFile),
        str("../", RINGLET_CUDA_PLUGIN_LIBDIR, "/ringlet/", kPluginFile), str(kPluginFile),
        str("../", kPluginFile), str("../../", kPluginFile)})
    paths.push_back(std::filesystem::path(dir + "/" + relative).lexically_normal().string());
  return paths;
}

// Tries each path; a file that exists but does not load (a missing libcudart) is the answer,
// not a reason to try the next.
Plugin load() {
  Plugin plugin;
  if (!*RINGLET_CUDA_PLUGIN_LIBDIR && std::getenv("RINGLET_CUDA_PLUGIN") == nullptr) {
    plugin.unavailable = "this build has no CUDA";
    return plugin;
  }
  std::vector<std::string> absent;
  for (const std::string& path : candidate_paths()) {
    plugin.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (plugin.handle != nullptr) return plugin;
    const std::string why = dlerror();
    if (why.find(path + ": cannot open shared object file") == std::string::npos) {
      plugin.unavailable = str("ringlet's CUDA plugin did not load: ", why);
      return plugin;
    }
    absent.push_back(path);
  }
  plugin.unavailable = str("ringlet's CUDA plugin was not found (looked for ", join(absent, ", "),
                           "; RINGLET_CUDA_PLUGIN names another)");
  return plugin;
}

const Plugin& plugin() {
  static const Plugin loaded = load();
  return loaded;
}

}  // namespace

const std::string& cuda_plugin_unavailable() { return plugin().unavailable; }

void* cuda_plugin_symbol(const char* name) {
  const Plugin& p = plugin();
  if (p.handle == nullptr) RINGLET_THROW(DeviceError, "CUDA is unavailable: ", p.unavailable);
  void* entry = dlsym(p.handle, name);
  if (entry == nullptr)
    RINGLET_THROW(DeviceError, "ringlet's CUDA plugin lacks ", name,
                  " (a plugin of another ringlet version?)");
  return entry;
}

}  // namespace ringlet::core
