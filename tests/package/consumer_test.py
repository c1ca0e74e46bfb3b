#!/usr/bin/env python3
"""ringlet as a library, from outside (a `meson test`).

usage: consumer_test.py BUILD_DIR SOURCE_ROOT

Installs the build into a scratch directory (`meson install --destdir`), then builds examples/
out of tree against the installed tree twice, as a user's project would: with meson through
pkg-config (ringlet.pc) and with CMake through find_package(ringlet) (ringlet::ringlet). Each
example runs with 2 ranks under the installed `ringlet launch`: all_reduce's sums are exact on
both ranks; ddp_toy's loss falls and both ranks end with equal parameters; train_cifar's loss
falls over 2 epochs, a second run resumes for a third, and on the emulated device its first
epoch's losses are the CPU's. ringlet.pc's `cuda`
variable says whether the library carries CUDA, as the build says. Then the Debian packages
(scripts/make_deb.sh, `make deb`): their file lists hold what each must, and the examples built
against the packages unpacked into a scratch root (dpkg -x) run as above. Where the build has
ringlet_torch (python/): it is installed where its Python looks under the prefix (on that
Python's sys.path when the prefix is its own, /usr/local or /usr), the installed copy imports and
registers "ringlet", and python3-ringlet holds it. The installed library exports ringlet::
names only (package/libringlet.map) and is under 15 MB. The installed headers are the public set
and what it includes (package/public_headers.txt), included as <ringlet/...>, and each compiles
alone. Only the CUDA plugin links a CUDA library:
with those libraries hidden (a mount namespace), the examples still run on the CPU and the
emulated device, and asking for a GPU says why there is none.
Exits 77 (meson: SKIP) saying why where nothing is installed (the sanitizer and fuzz builds)
or cmake is missing (scripts/install-deps.sh installs it).
"""
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def sh(cmd, env=None, timeout=600):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout


def installed_paths(build, destdir):
    options = {o["name"]: o["value"] for o in
               json.loads(sh(["meson", "introspect", build, "--buildoptions"]))}
    prefix = destdir + options["prefix"]
    return prefix, os.path.join(prefix, options["libdir"]), options


def run_example(ringlet, exe, env, *args):
    proc = subprocess.run([ringlet, "launch", "--nproc-per-node", "2", exe, *args],
                          capture_output=True, text=True, timeout=180, env={**os.environ, **env})
    return proc.returncode, proc.stdout


EPOCH = re.compile(r"rank (\d) epoch (\d): mean loss ([\d.]+)")


def check_train_cifar(ringlet, built, scratch):
    """2 epochs on the CPU, then resumed for a third; 1 epoch on the emulated device, whose
    losses are the CPU's (the emulated device computes as the CPU does)."""
    exe, run = os.path.join(built, "train_cifar"), os.path.join(scratch, "cifar_run")
    problems = []
    status, out = run_example(ringlet, exe, {}, "--epochs", "2", "--out", run)
    losses = {(int(r), int(e)): float(l) for r, e, l in EPOCH.findall(out)}
    if status != 0 or len(losses) != 4 or any(losses[r, 2] >= losses[r, 1] for r in (0, 1)):
        problems.append(f"train_cifar, 2 epochs: status {status}, losses {losses}:\n{out}")
    status, out = run_example(ringlet, exe, {}, "--epochs", "3", "--out", run)
    if status != 0 or out.count("resumed after epoch 2") != 2 or len(EPOCH.findall(out)) != 2:
        problems.append(f"train_cifar, resumed for a third epoch: status {status}:\n{out}")
    status, out = run_example(ringlet, exe, {}, "--epochs", "1", "--device", "emu", "--out",
                              os.path.join(scratch, "cifar_emu"))
    emu = {(int(r), int(e)): float(l) for r, e, l in EPOCH.findall(out)}
    if status != 0 or emu != {k: v for k, v in losses.items() if k[1] == 1}:
        problems.append(f"train_cifar on emu: losses {emu}, the CPU's {losses}:\n{out}")
    print(f"{built}: train_cifar: 2 epochs {losses}, resumed, emu {emu}: "
          f"{'ok' if not problems else 'FAILED'}")
    return problems, losses


def check_train_cifar_again(ringlet, built, scratch, losses):
    """Another build of train_cifar: its first epoch is the first build's."""
    status, out = run_example(ringlet, os.path.join(built, "train_cifar"), {}, "--epochs", "1",
                              "--out", os.path.join(scratch, "cifar_again"))
    again = {(int(r), int(e)): float(l) for r, e, l in EPOCH.findall(out)}
    ok = status == 0 and again and again == {k: v for k, v in losses.items() if k[1] == 1}
    print(f"{built}: train_cifar, 1 epoch: {again}: {'ok' if ok else 'FAILED'}")
    return [] if ok else [f"{built}/train_cifar: status {status}, losses {again}:\n{out}"]


def check_runs(ringlet, built, env):
    problems = []
    status, out = run_example(ringlet, os.path.join(built, "all_reduce"), env)
    if status != 0 or out.count(": exact") != 2:
        problems.append(f"{built}/all_reduce: status {status}, output:\n{out}")
    status, out = run_example(ringlet, os.path.join(built, "ddp_toy"), env)
    if status != 0 or out.count("(fell); parameters equal on every rank: yes") != 2:
        problems.append(f"{built}/ddp_toy: status {status}, output:\n{out}")
    print(f"{built}: all_reduce and ddp_toy with 2 ranks: {'ok' if not problems else 'FAILED'}")
    # Each example answers --help with its usage, starting nothing and writing nothing.
    with tempfile.TemporaryDirectory() as cwd:
        for name in ("all_reduce", "ddp_toy", "train_cifar"):
            proc = subprocess.run([os.path.join(built, name), "--help"], capture_output=True,
                                  text=True, timeout=30, cwd=cwd, env={**os.environ, **env})
            if proc.returncode != 0 or "usage:" not in proc.stdout or os.listdir(cwd):
                problems.append(f"{built}/{name} --help: status {proc.returncode}, wrote "
                                f"{os.listdir(cwd)}, output:\n{proc.stdout}{proc.stderr}")
    return problems


DEB_FILES = {
    "ringlet": ["./usr/bin/ringlet", "./usr/share/ringlet/recipes/fmnist_fast.json"],
    "libringlet0": ["/libringlet.so.0 -> ", "/libringlet.so.0.1.0"],
    "libringlet-dev": ["./usr/include/ringlet/distributed/ddp.h",
                       "/libringlet.so -> ", "/pkgconfig/ringlet.pc",
                       "/cmake/ringlet/ringletConfig.cmake"],
    "python3-ringlet": ["-packages/ringlet_torch/__init__.py", "-packages/ringlet_torch/_C."],
}
TORCH_PYTHON = "/usr/bin/python3"


def check_torch_package(build, destdir, options):
    """ringlet_torch, where the build has it: installed on its Python's path, and importable."""
    if not os.path.isdir(os.path.join(build, "python", "ringlet_torch")):
        print("ringlet_torch: not in this build")
        return []
    found = [d for d, _, fs in os.walk(destdir) if d.endswith("-packages/ringlet_torch")]
    if len(found) != 1:
        return [f"ringlet_torch installed {len(found)} times: {found}"]
    site = os.path.dirname(found[0])
    problems = []
    path = sh([TORCH_PYTHON, "-c", "import sys; print('\\n'.join(sys.path))"]).split()
    if options["prefix"] in ("/usr/local", "/usr") and site[len(destdir):] not in path:
        problems.append(f"ringlet_torch went to {site[len(destdir):]}, not on {TORCH_PYTHON}'s path")
    out = sh([TORCH_PYTHON, "-c", "import ringlet_torch, torch.distributed as d; "
              "print(ringlet_torch.__file__, hasattr(d.Backend, 'RINGLET'))"],
             env={"PYTHONPATH": site})
    if not out.startswith(found[0]) or "True" not in out:
        problems.append(f"the installed ringlet_torch did not import from {site}: {out}")
    print(f"ringlet_torch: installed in {site[len(destdir):]}, imports: {'ok' if not problems else 'FAILED'}")
    return problems


def check_cmake_install(with_cmake, scratch):
    """`cmake --install` keeps the run path to libringlet.so (ringlet::ringlet's link option): the
    installed example starts with no LD_LIBRARY_PATH."""
    apps = os.path.join(scratch, "apps")
    sh(["cmake", "--install", with_cmake, "--prefix", apps])
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    proc = subprocess.run([os.path.join(apps, "bin", "ddp_toy"), "--help"], capture_output=True,
                          text=True, timeout=30, env=env)
    if proc.returncode != 0 or "usage:" not in proc.stdout:
        return [f"{apps}/bin/ddp_toy after cmake --install: status {proc.returncode}: "
                f"{proc.stdout}{proc.stderr}"]
    return []


EXPORTED = re.compile(r"^(typeinfo for |typeinfo name for |vtable for |VTT for |"
                      r"guard variable for )?ringlet::")


def check_library(libdir):
    """The installed library exports ringlet's names only (package/libringlet.map) and, stripped,
    stays under 15 MB."""
    lib = os.path.realpath(os.path.join(libdir, "libringlet.so"))
    problems = []
    names = [line.split(" ", 2)[2] for line in
             sh(["nm", "-DC", "--defined-only", lib]).splitlines() if line.count(" ") >= 2]
    foreign = [n for n in names if not EXPORTED.match(n)]
    if foreign or not names:
        problems.append(f"{lib} exports {len(foreign)} name(s) outside ringlet:: "
                        f"(of {len(names)}): {foreign[:8]}")
    size = os.path.getsize(lib)
    if size >= 15 * 1024 * 1024:
        problems.append(f"{lib} is {size / 2**20:.1f} MB installed (at most 15)")
    print(f"consumer: {lib}: {len(names)} exported names, all ringlet::; {size / 2**20:.1f} MB")
    return problems


CUDA_LIBS = re.compile(r"^\s*(libcuda\S*|libcublas\S*|libcudnn\S*) => (/\S+)", re.M)


def hide_cuda_command(libdir):
    """A command prefix under which the CUDA libraries the plugin links are out of reach (an empty
    tmpfs over each of their directories, in a mount namespace of its own), with the names of
    those directories; None and why not where that cannot be done here."""
    plugin = os.path.join(libdir, "ringlet", "libringlet-cuda.so")
    dirs = sorted({os.path.dirname(path) for _, path in CUDA_LIBS.findall(sh(["ldd", plugin]))})
    if not dirs:
        return None, f"ldd {plugin} names no CUDA library"
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return None, f"unshare --mount: {probe.stderr.strip()} (needs root)"
    mounts = " && ".join(f"mount -t tmpfs no-cuda '{d}'" for d in dirs)
    return ["unshare", "--mount", "sh", "-c", f'{mounts} && exec "$@"', "sh"], dirs


def check_without_cuda(build_has_cuda, libdir, ringlet, built):
    """The CUDA code is a plugin loaded on first use: nothing else links a CUDA library, and with
    the CUDA libraries out of reach, the examples run on the CPU and the emulated device, while
    asking for a GPU says why there is none."""
    if not build_has_cuda:
        print("without CUDA: not checked (this build has no CUDA, so nothing links it)")
        return []
    problems = []
    lib = os.path.realpath(os.path.join(libdir, "libringlet.so"))
    for binary in (lib, os.path.join(built, "ddp_toy"), ringlet):
        needed = re.findall(r"\[(lib(?:cuda|cublas|cudnn)[^\]]*)\]", sh(["readelf", "-d", binary]))
        if needed:
            problems.append(f"{binary} links {needed}: only the CUDA plugin may")
    hide, dirs = hide_cuda_command(libdir)
    if hide is None:
        print(f"without CUDA: the run with the CUDA libraries hidden was not done: {dirs}")
        return problems + [f"CUDA libraries could not be hidden: {dirs}"]
    def launch(*args):
        proc = subprocess.run(hide + [ringlet, "launch", "--nproc-per-node", "2", *args],
                              capture_output=True, text=True, timeout=180)
        return proc.returncode, proc.stdout + proc.stderr
    status, out = launch(os.path.join(built, "ddp_toy"))
    if status != 0 or out.count("(fell); parameters equal on every rank: yes") != 2:
        problems.append(f"ddp_toy with {dirs} hidden: status {status}:\n{out}")
    status, out = launch(os.path.join(built, "train_cifar"), "--epochs", "1", "--device", "emu",
                         "--out", os.path.join(os.path.dirname(built), "cifar_no_cuda"))
    if status != 0 or len(EPOCH.findall(out)) != 2:
        problems.append(f"train_cifar on emu with {dirs} hidden: status {status}:\n{out}")
    status, out = launch(os.path.join(built, "train_cifar"), "--epochs", "1", "--device", "cuda",
                         "--out", os.path.join(os.path.dirname(built), "cifar_cuda"))
    if status == 0 or "CUDA is unavailable" not in out or "libcudart" not in out:
        problems.append(f"train_cifar --device cuda with {dirs} hidden did not say why there is "
                        f"no GPU (status {status}):\n{out}")
    print(f"without CUDA ({', '.join(dirs)} hidden): ddp_toy and train_cifar on emu ran, "
          f"--device cuda said why not: {'ok' if not problems else 'FAILED'}")
    return problems


INTERNAL = re.compile(r"^(transport/(tcp|shm|rdma)/|device/(emu|cuda)/|tensor/(emu|cuda|kernels)/|"
                      r"collectives/device_|collectives/work_driver)")
# A program may wait on a Work but not complete or fail it: that is the communicator's.
WORK_DRIVER_CALL = """#include <ringlet/collectives/communicator.h>
void finish(ringlet::collectives::Work& work) { work.part_done(); }
"""


def compile_alone(cflags, header):
    proc = subprocess.run(["c++", *cflags, "-fsyntax-only", "-x", "c++", "-"],
                          input=f"#include <ringlet/{header}>\n", capture_output=True, text=True,
                          timeout=300)
    return header, proc.returncode, proc.stderr


def check_headers(includedir, pc_env):
    """Every installed header is included as <ringlet/...> (no quoted ringlet path is left in
    them) and compiles alone with ringlet.pc's flags; none is a transport's or a device
    executor's internals (the public set includes none); a program cannot complete a Work."""
    root = os.path.join(includedir, "ringlet")
    headers = sorted(os.path.relpath(os.path.join(d, f), root)
                     for d, _, fs in os.walk(root) for f in fs if f.endswith(".h"))
    problems = []
    quoted = re.compile(r'^\s*#\s*include\s*"(core|transport|device|collectives|tensor|nn|data|'
                        r'checkpoint|distributed|trainer)/', re.M)
    for h in headers:
        with open(os.path.join(root, h)) as f:
            if quoted.search(f.read()):
                problems.append(f"{root}/{h} still includes a ringlet header by its tree path")
    cflags = sh(["pkg-config", "--cflags", "ringlet"], env=pc_env).split()
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for header, status, err in pool.map(lambda h: compile_alone(cflags, h), headers):
            if status != 0:
                problems.append(f"<ringlet/{header}> does not compile alone:\n{err[-1500:]}")
    internal = [h for h in headers if INTERNAL.match(h)]
    if internal:
        problems.append(f"internals installed (a public header includes them): {internal}")
    proc = subprocess.run(["c++", *cflags, "-fsyntax-only", "-x", "c++", "-"],
                          input=WORK_DRIVER_CALL, capture_output=True, text=True, timeout=300)
    if proc.returncode == 0 or "private" not in proc.stderr:
        problems.append("a program can complete a Work itself (Work::part_done is not private): "
                        f"{proc.stderr[-300:]}")
    print(f"headers: {len(headers)} installed under {root}, none internal, each compiles alone: "
          f"{'ok' if not problems else 'FAILED'}")
    return problems


def check_lintian(debs):
    """Lintian finds no error in the packages (scripts/install-deps.sh installs it)."""
    if shutil.which("lintian") is None:
        print("debs: lintian is not installed: the packages' lintian check did not run")
        return []
    proc = subprocess.run(["lintian", "--tag-display-limit", "0", *debs], capture_output=True,
                          text=True, timeout=300)
    tags = [line for line in proc.stdout.splitlines() if line[:2] in ("E:", "W:")]
    errors = [line for line in tags if line.startswith("E:")]
    print(f"debs: lintian: {len(errors)} error(s), {len(tags) - len(errors)} warning(s)")
    return [f"lintian: {e}" for e in errors]


def check_debs(build, root, scratch, has_cuda):
    """make_deb.sh's packages: what each holds, and the examples built against them."""
    out = os.path.join(scratch, "debs")
    debs = sh(["bash", os.path.join(root, "scripts", "make_deb.sh"), build, out]).split()
    problems, unpacked = [], os.path.join(scratch, "debroot")
    for deb in debs:
        name = os.path.basename(deb).split("_")[0]
        listing = sh(["dpkg-deb", "-c", deb])
        missing = [f for f in DEB_FILES.get(name, ["?"]) if f not in listing]
        if name == "libringlet0" and has_cuda and "/ringlet/libringlet-cuda.so" not in listing:
            missing.append("the CUDA plugin")
        if missing:
            problems.append(f"{os.path.basename(deb)} lacks {missing}")
        sh(["dpkg-deb", "-x", deb, unpacked])
    built_names = {os.path.basename(d).split("_")[0] for d in debs}
    absent = sorted(set(DEB_FILES) - {"python3-ringlet"} - built_names)
    if absent:
        problems.append(f"make_deb.sh built no {absent}")
    dev = [d for d in debs if os.path.basename(d).startswith("libringlet-dev_")]
    depends = sh(["dpkg-deb", "-f", dev[0], "Depends"]).strip() if dev else ""
    if "libringlet0 (=" not in depends or "asio" in depends:
        problems.append(f"libringlet-dev depends on '{depends}': libringlet0 (= version) and no Asio")
    print(f"debs: {' '.join(os.path.basename(d) for d in debs)}")
    problems += check_lintian(debs)
    libdir = os.path.dirname(next(iter(
        os.path.join(d, f) for d, _, fs in os.walk(unpacked) for f in fs if f == "ringlet.pc")))
    libdir = os.path.dirname(libdir)  # .../lib/<triplet>
    built = os.path.join(scratch, "from_debs")
    sh(["meson", "setup", built, os.path.join(root, "examples")],
       env={"PKG_CONFIG_PATH": os.path.join(libdir, "pkgconfig")})
    sh(["ninja", "-C", built])
    ringlet = os.path.join(unpacked, "usr", "bin", "ringlet")
    return problems + check_runs(ringlet, built, {})


def main():
    build, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if not os.path.exists(os.path.join(build, "package", "libringlet.so")):
        print("skipped: this build installs nothing (sanitizer or fuzz build)")
        return SKIP
    if shutil.which("cmake") is None:
        print("skipped: cmake is not installed (scripts/install-deps.sh installs it)")
        return SKIP
    scratch = tempfile.mkdtemp(prefix="ringlet_consumer_")
    try:
        destdir = os.path.join(scratch, "root")
        sh(["meson", "install", "-C", build, "--no-rebuild", "--destdir", destdir, "--strip",
            "--quiet"])
        prefix, libdir, options = installed_paths(build, destdir)
        ringlet = os.path.join(prefix, options["bindir"], "ringlet")
        pc_env = {"PKG_CONFIG_PATH": os.path.join(libdir, "pkgconfig")}
        cuda = sh(["pkg-config", "--variable=cuda", "ringlet"], env=pc_env).strip()
        with open(os.path.join(build, "meson-info", "intro-targets.json")) as f:
            has_cuda = any(s.get("language") == "cuda" for t in json.load(f)
                           for s in t.get("target_sources", []))
        problems = [] if cuda == ("yes" if has_cuda else "no") else [
            f"ringlet.pc says cuda={cuda}, the build {'has' if has_cuda else 'has no'} CUDA"]
        problems += check_library(libdir)
        problems += check_headers(os.path.join(prefix, options["includedir"]), pc_env)
        with_meson, with_cmake = os.path.join(scratch, "meson"), os.path.join(scratch, "cmake")
        sh(["meson", "setup", with_meson, os.path.join(root, "examples")], env=pc_env)
        sh(["ninja", "-C", with_meson])
        sh(["cmake", "-S", os.path.join(root, "examples"), "-B", with_cmake,
            f"-DCMAKE_PREFIX_PATH={prefix}"])
        sh(["cmake", "--build", with_cmake])
        problems += check_cmake_install(with_cmake, scratch)
        problems += check_without_cuda(has_cuda, libdir, ringlet, with_meson)
        # Both find libringlet.so through their run path (ringlet.pc's, CMake's).
        problems += check_runs(ringlet, with_meson, {})
        found, losses = check_train_cifar(ringlet, with_meson, scratch)
        problems += found + check_train_cifar_again(ringlet, with_cmake, scratch, losses)
        problems += check_runs(ringlet, with_cmake, {})
        problems += check_torch_package(build, destdir, options)
        problems += check_debs(build, root, scratch, has_cuda)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        problems = [str(e)]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for p in problems:
        print("FAILED:", p)
    print(f"{1 if not problems else 0} passed, {1 if problems else 0} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
