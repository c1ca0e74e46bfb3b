# Sourced by scripts/fuzz.sh and scripts/sanitize.sh: the one clang build with ASan + UBSan
# (build-fuzz) that holds both the libFuzzer targets and the whole test suite. -Dfuzz=true gives
# the parsing libraries libFuzzer's coverage instrumentation (meson.build says which); the
# tests link without libFuzzer's main. Expects MESON set and the working directory at the root.
clang_asan_dir=build-fuzz

# Whether clang++ and its sanitizer and libFuzzer runtimes are installed.
have_clang_asan() {
  command -v clang++ >/dev/null 2>&1 &&
    compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null
}

# Installs clang when it is missing (scripts/install-deps.sh --fuzz); fails when it cannot.
ensure_clang_asan() {
  have_clang_asan || bash scripts/install-deps.sh --fuzz || true
  have_clang_asan
}

# Sets build-fuzz up once (an interrupted setup is redone). Meson puts ccache in front of the
# compilers it finds by itself, but not in front of CC and CXX given to it, so this build names
# ccache itself: uncached it is the suite's longest build (ASan and UBSan's instrumentation
# doubles the compile time; about 15 minutes on 2 cores). Its ~100 test programs each hold a
# copy of the library code they use: linked without position independence and with their line
# tables compressed (which llvm-symbolizer reads), they take 30% less disk (2.7 GiB before).
configure_clang_asan() {
  [ -f "$clang_asan_dir/build.ninja" ] && return 0
  rm -rf "$clang_asan_dir"
  local launcher=""
  command -v ccache >/dev/null 2>&1 && launcher="ccache "
  CC="${launcher}clang" CXX="${launcher}clang++" "$MESON" setup "$clang_asan_dir" -Dfuzz=true \
    -Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false \
    -Doptimization=2 -Ddebug=false -Dtest_optimization=0 \
    -Dcpp_link_args="-no-pie -Wl,--compress-debug-sections=zlib" >/dev/null
}
