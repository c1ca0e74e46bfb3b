#!/usr/bin/env bash
# Debian packages of a build, without building again: `meson install` into a scratch tree
# (relocatable: the pkg-config and CMake files find their prefix, the program its recipes),
# moved under /usr and split as Debian splits a library, each packed with dpkg-deb:
#   ringlet          the ringlet program and its recipes (the program links ringlet statically;
#                    with CUDA it depends on libringlet0 for the CUDA plugin)
#   libringlet0      libringlet.so.0 (the runtime library, its shlibs) and, with CUDA, the CUDA
#                    plugin <libdir>/ringlet/libringlet-cuda.so (core/cuda_plugin.h)
#   libringlet-dev   the libringlet.so link, the headers, ringlet.pc, the CMake package
#   python3-ringlet  ringlet_torch, the torch.distributed backend (when the build has it:
#                    python/README.md), for the Python it was built against
# CUDA's libraries are not Debian packages: the CUDA plugin of a build with CUDA needs them at run
# time from the CUDA Toolkit, as the build did (the description says which build it is); without
# them the library and the program still run on CPUs and the emulated device.
#
# usage: scripts/make_deb.sh [BUILD_DIR] [OUT_DIR]      (make deb: build, then this)
set -euo pipefail
build=${1:-build}
out=${2:-$build/deb}
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(meson introspect "$build" --projectinfo | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -dumpmachine)
cuda=$(grep -q '"language": "cuda"' "$build/meson-info/intro-targets.json" && echo yes || echo no)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
meson install -C "$build" --no-rebuild --destdir "$stage/install" --strip --quiet
prefix=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
tree="$stage/install$prefix"
[ -d "$tree/lib/$triplet" ] || { echo "make_deb: no lib/$triplet in the installed tree" >&2; exit 1; }

# package NAME SECTION DEPENDS DESCRIPTION PATH...: the paths (relative to the prefix) under /usr.
package() {
  local name=$1 section=$2 depends=$3 description=$4
  shift 4
  local dir="$stage/$name"
  mkdir -p "$dir/DEBIAN" "$dir/usr/share/doc/$name"
  for path in "$@"; do
    mkdir -p "$dir/usr/$(dirname "$path")"
    cp -a "$tree/$path" "$dir/usr/$path"
  done
  cp "$root/README.md" "$dir/usr/share/doc/$name/README.md"
  printf 'ringlet, a from-scratch data-parallel training stack.\nCopyright: %s ringlet developers\n' \
    "$(date +%Y)" >"$dir/usr/share/doc/$name/copyright"
  printf '%s (%s) unstable; urgency=low\n\n  * Packed from a build by scripts/make_deb.sh.\n\n -- %s  %s\n' \
    "$name" "$version" "ringlet developers <developers@ringlet.dev>" "$(date -R)" |
    gzip -9n >"$dir/usr/share/doc/$name/changelog.gz"
  # A shared library: not executable, ldconfig run on install, its shlibs for dependents.
  if compgen -G "$dir/usr/lib/*/libringlet.so.*.*" >/dev/null; then
    chmod 0644 "$dir"/usr/lib/*/libringlet.so.*.* "$dir"/usr/lib/*/ringlet/*.so 2>/dev/null || true
    echo "activate-noawait ldconfig" >"$dir/DEBIAN/triggers"
    echo "libringlet 0 $name (>= $version)" >"$dir/DEBIAN/shlibs"
  fi
  local size
  size=$(du -sk "$dir/usr" | cut -f1)
  cat >"$dir/DEBIAN/control" <<CONTROL
Package: $name
Version: $version
Architecture: $arch
Section: $section
Priority: optional
Maintainer: ringlet developers <developers@ringlet.dev>
Installed-Size: $size
Depends: $depends
Description: $description
 Collectives (ring all-reduce over tcp, shm, rdma, device windows),
 tensors with autograd on CPUs and GPUs, nn, DDP and a torchrun-style
 launcher, with no PyTorch, NCCL, Gloo or MPI inside. Built with CUDA:
 $cuda (its plugin's runtime and cuBLAS come from the CUDA Toolkit).
CONTROL
  mkdir -p "$out"
  dpkg-deb --root-owner-group --build "$dir" "$out/${name}_${version}_${arch}.deb" >/dev/null
  echo "$out/${name}_${version}_${arch}.deb"
}

runtime="libc6, libstdc++6, libopenblas0 | libopenblas0-pthread, zlib1g, libyaml-cpp0.7, libibverbs1"
plugin=() program_depends=$runtime
if [ -d "$tree/lib/$triplet/ringlet" ]; then
  plugin=("lib/$triplet/ringlet") program_depends="$runtime, libringlet0 (= $version)"
fi
package ringlet science "$program_depends" "data-parallel training from scratch (program)" \
  bin/ringlet share/ringlet
package libringlet0 libs "$runtime" "data-parallel training from scratch (shared library)" \
  "lib/$triplet/libringlet.so.0" "lib/$triplet/libringlet.so.$version" "${plugin[@]}"
# The installed headers include nlohmann::json (traces, configs); none includes Asio or yaml-cpp.
package libringlet-dev libdevel "libringlet0 (= $version), nlohmann-json3-dev" \
  "data-parallel training from scratch (headers, pkg-config, CMake)" \
  "lib/$triplet/libringlet.so" "lib/$triplet/pkgconfig" "lib/$triplet/cmake" include/ringlet
# ringlet_torch, installed where the build's Python finds packages under the prefix; packed where
# Debian's Python 3 packages live (lib/python3/dist-packages, on every python3's path).
pydir=$(cd "$tree" && find . -type d -name ringlet_torch -path '*-packages/*' | head -n 1)
if [ -n "$pydir" ]; then
  mkdir -p "$tree/lib/python3/dist-packages"
  [ "$pydir" = ./lib/python3/dist-packages/ringlet_torch ] ||
    mv "$tree/$pydir" "$tree/lib/python3/dist-packages/ringlet_torch"
  package python3-ringlet python "python3, libc6, libstdc++6, python3-torch (>= 1.13)" \
    "data-parallel training from scratch (torch.distributed backend)" \
    lib/python3/dist-packages/ringlet_torch
fi
