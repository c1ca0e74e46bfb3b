#!/usr/bin/env bash
# Installs the Debian packages ringlet needs to build and test, and only those that are
# missing, so running it again is cheap and changes nothing. It never installs rdma-core
# (it pulls in udev and upgrades systemd) and never needs PyTorch: `--golden` adds
# python3-torch and python3-numpy, which only tests/golden/make_golden.py uses; `--torch` adds
# python3-torch, libtorch-dev, pybind11-dev and python3-dev, which ringlet_torch (python/) is
# built against and tests/torch runs with; `--fuzz` adds
# clang and its libFuzzer runtime, which scripts/fuzz.sh uses; `--slurm` adds Slurm's daemons,
# clients and munge, which tests/trainer/slurm_test.py starts privately (not as services);
# `--report`
# adds Chromium's headless shell, which tests/trainer/report_browser.py renders a report with.
#
# usage: scripts/install-deps.sh [--golden] [--torch] [--fuzz] [--slurm] [--report] [--dry-run]
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++ make
  cmake  # tests/package/consumer_test.py builds examples/ as a CMake project
  lintian  # ... and checks make deb's packages with it
  libibverbs-dev libasio-dev
  libxtensor-dev libxtensor-blas-dev xtl-dev libxsimd-dev
  nlohmann-json3-dev doctest-dev libopenblas-dev zlib1g-dev libyaml-cpp-dev
  ccache dataset-fashion-mnist python3 iperf3
  python3-protobuf  # tests read TensorBoard event files with it; ringlet never links it
  openmpi-bin  # tests start ranks with mpirun; ringlet itself never links MPI
  iproute2     # the multi-host test joins two network namespaces
)
golden_packages=(python3-torch python3-numpy)
torch_packages=(python3-torch libtorch-dev pybind11-dev python3-dev)
fuzz_packages=(clang libclang-rt-14-dev)
slurm_packages=(slurmctld slurmd slurm-client munge)
report_packages=(chromium-headless-shell)

dry_run=0
for arg in "$@"; do
  case "$arg" in
    --golden) packages+=("${golden_packages[@]}") ;;
    --torch) packages+=("${torch_packages[@]}") ;;
    --fuzz) packages+=("${fuzz_packages[@]}") ;;
    --slurm) packages+=("${slurm_packages[@]}") ;;
    --report) packages+=("${report_packages[@]}") ;;
    --dry-run) dry_run=1 ;;
    -h|--help)
      sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
      exit 0 ;;
    *) echo "install-deps: unknown argument '$arg' (expected --golden, --torch, --fuzz, --slurm, --report or --dry-run)" >&2; exit 2 ;;
  esac
done

# Prints the packages among "$@" that dpkg does not report as fully installed ("ii").
# One dpkg-query call for all of them keeps the common case (nothing missing) fast.
missing_of() {
  local installed
  installed=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "$@" 2>/dev/null |
              awk '$1 == "ii" { print $2 }' || true)
  local pkg
  for pkg in "$@"; do
    grep -qxF "$pkg" <<<"$installed" || printf '%s\n' "$pkg"
  done
}

mapfile -t missing < <(missing_of "${packages[@]}")

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} required packages are installed; nothing to do"
  exit 0
fi

echo "install-deps: missing ${#missing[@]} package(s): ${missing[*]}"
if [ "$dry_run" -eq 1 ]; then
  echo "install-deps: --dry-run, not installing"
  exit 1
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
  else
    echo "install-deps: not root and sudo is not available; install as root:" >&2
    echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

run() {
  echo "+ $*"
  "$@"
}

export DEBIAN_FRONTEND=noninteractive
run "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get update -o DPkg::Lock::Timeout=600
run "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"

# Check again: apt can succeed while leaving a package unconfigured.
mapfile -t still < <(missing_of "${missing[@]}")
if [ ${#still[@]} -ne 0 ]; then
  echo "install-deps: still missing after apt-get: ${still[*]}" >&2
  exit 1
fi
echo "install-deps: installed ${missing[*]}"
