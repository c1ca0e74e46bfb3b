#!/usr/bin/env python3
"""ringlet under a real Slurm: starts munged, slurmctld and slurmd on this host (loopback, a
private configuration, state and sockets in a temporary directory, nothing of the system's
touched), then
  1. `srun -n 2 ringlet train ...` trains a 2-rank job;
  2. the README's batch script (scripts/slurm/train.sbatch) trains one with `sbatch --wait`;
  3. the same script submitted again into a new run directory is cancelled with `scancel`
     once its first checkpoint exists: every rank stops within Slurm's KillWait, no process
     is left, the checkpoint is readable; submitted once more it resumes and ends bit for bit
     equal to job 2.
Exits 77 (meson: SKIP) saying why when slurm-wlm or munge is missing (scripts/install-deps.sh
--slurm installs them), when not run as root (slurmd must be) or when the daemons do not start.

usage: slurm_test.py RINGLET SOURCE_ROOT
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import run_files

SKIP = 77
TRAIN = ["--epochs", "3", "--limit_train", "2048", "--limit_test", "200", "--threads", "1",
         "--workers", "1", "--log_every", "1000"]
DEADLINE = 120  # seconds for any one command


class Failure(Exception):
    pass


def skip(why):
    print(f"skipped: {why}")
    sys.exit(SKIP)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(d, host):
    ctld, slurmd = free_port(), free_port()
    return f"""ClusterName=ringlet-test
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
SlurmctldPort={ctld}
SlurmdPort={slurmd}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
KillWait=10
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=30 State=UP OverSubscribe=YES
"""


class Cluster:
    """munged + slurmctld + slurmd in `d`; stop() ends them."""

    def __init__(self, d):
        self.d = d
        self.daemons = []
        self.env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"))

    def start(self):
        d = self.d
        for sub in ("state", "spool"):
            (d / sub).mkdir()
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        host = socket.gethostname().split(".")[0]
        (d / "slurm.conf").write_text(slurm_conf(d, host))
        self.spawn("munged", ["munged", "-F", "-f", f"--key-file={key}",
                              f"--socket={d}/munge.sock", f"--pid-file={d}/munged.pid",
                              f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"])
        self.wait_for(lambda: (d / "munge.sock").exists(), 10, "munged made no socket")
        self.spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self.spawn("slurmd", ["slurmd", "-D"])
        self.wait_for(lambda: self.node_state() == "idle", 30,
                      f"the node is not idle (sinfo says '{self.node_state()}')")

    def spawn(self, name, cmd):
        log = open(self.d / f"{name}.out", "w")
        self.daemons.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                    env=self.env)))

    def wait_for(self, ready, seconds, why):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for name, proc in self.daemons:
                if proc.poll() is not None:
                    log = (self.d / f"{name}.out").read_text()[-2000:]
                    skip(f"{name} exited with status {proc.returncode} at start:\n{log}")
            if ready():
                return
            time.sleep(0.2)
        skip(f"the Slurm daemons did not come up within {seconds} s: {why}")

    def node_state(self):
        r = self.run(["sinfo", "-h", "-o", "%T"], check=False)
        return r.stdout.strip()

    def run(self, cmd, check=True, env=None):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE,
                           env=dict(self.env, **(env or {})))
        if check and r.returncode != 0:
            raise Failure(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r

    def stop(self):
        for _, proc in reversed(self.daemons):
            proc.terminate()
        for _, proc in reversed(self.daemons):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def expect(condition, what):
    if not condition:
        raise Failure(what)
    print(f"  ok: {what}")


def job_state(cluster, job):
    r = cluster.run(["squeue", "-h", "-j", job, "-o", "%T"], check=False)
    return r.stdout.strip()


def srun_job(cluster, ringlet, d):
    print("srun -n 2 ringlet train")
    out = d / "srun_run"
    r = cluster.run(["srun", "-n", "2", "-t", "5", ringlet, "train", "--out", str(out)] + TRAIN)
    expect("done: 3 epoch(s) on 2 ranks" in r.stdout, "srun: 2 ranks trained 3 epochs")
    expect(run_files.recorded_epochs(out) == [1, 2, 3], "srun: metrics record epochs 1, 2, 3")


def sbatch(cluster, script, out, ringlet, wait):
    args = ["sbatch", "--parsable", "-o", f"{out}.log", "-t", "10"] + (["--wait"] if wait else [])
    r = cluster.run(args + [str(script)] + TRAIN, env={"RINGLET": ringlet, "OUT": str(out)})
    return r.stdout.strip().split(";")[0]


def batch_job(cluster, ringlet, script, d):
    print("sbatch scripts/slurm/train.sbatch")
    out = d / "batch_run"
    sbatch(cluster, script, out, ringlet, wait=True)
    log = Path(f"{out}.log").read_text()
    expect("done: 3 epoch(s) on 2 ranks" in log, "sbatch --wait: the batch script trained 3 epochs")
    return run_files.read_checkpoint(out / "checkpoint.safetensors")


def cancelled_job(cluster, ringlet, script, d, reference):
    print("scancel in the middle, then the same sbatch again")
    out = d / "cancelled_run"
    job = sbatch(cluster, script, out, ringlet, wait=False)
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end and not (out / "checkpoint.safetensors").exists():
        time.sleep(0.02)
    expect((out / "checkpoint.safetensors").exists(), f"job {job} wrote its first checkpoint")
    cluster.run(["scancel", job])
    end = time.monotonic() + 60
    while time.monotonic() < end and (job_state(cluster, job) or run_files.processes_of(out)):
        time.sleep(0.2)
    expect(not job_state(cluster, job), f"job {job} left the queue after scancel")
    expect(not run_files.processes_of(out), "no rank of the cancelled job is left running")
    epochs = run_files.recorded_epochs(out)
    expect(epochs and epochs[-1] < 3, f"the cancelled job stopped mid-run (epochs {epochs})")
    run_files.read_checkpoint(out / "checkpoint.safetensors")
    print("  ok: its checkpoint is readable")
    sbatch(cluster, script, out, ringlet, wait=True)
    log = Path(f"{out}.log").read_text()
    expect("resumed from" in log, "submitted again, the job resumed from the checkpoint")
    expect(run_files.recorded_epochs(out) == [1, 2, 3], "metrics record epochs 1, 2, 3 once each")
    difference = run_files.difference(run_files.read_checkpoint(out / "checkpoint.safetensors"),
                                      reference)
    expect(not difference, "the resumed run ends bit for bit like the uncancelled one" +
           (f" (differs: {difference})" if difference else ""))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ringlet, root = sys.argv[1], Path(sys.argv[2])
    missing = [p for p in ("munged", "slurmctld", "slurmd", "srun", "sbatch", "scancel", "squeue",
                           "sinfo") if shutil.which(p) is None]
    if missing:
        skip(f"{', '.join(missing)} not installed (scripts/install-deps.sh --slurm installs "
             "slurm-wlm's daemons and munge)")
    if os.geteuid() != 0:
        skip("slurmd must run as root to start jobs, and this is not root")
    script = root / "scripts" / "slurm" / "train.sbatch"
    readme = (root / "README.md").read_text()
    d = Path(tempfile.mkdtemp(prefix="ringlet_slurm_"))
    cluster = Cluster(d)
    try:
        cluster.start()
        print(f"Slurm up in {d}: {cluster.run(['sinfo', '--version']).stdout.strip()}")
        expect("scripts/slurm/train.sbatch" in readme, "the README names scripts/slurm/train.sbatch")
        shown = [line for line in readme.splitlines() if line.startswith("sbatch ")]
        expect(shown and all(line in script.read_text() for line in shown),
               "the README's sbatch command lines are the ones in the script's header")
        srun_job(cluster, ringlet, d)
        reference = batch_job(cluster, ringlet, script, d)
        cancelled_job(cluster, ringlet, script, d, reference)
        print("1 passed, 0 failed")
        shutil.rmtree(d, ignore_errors=True)
        return 0
    except Exception as e:  # Failure, an unreadable file, a timeout, a file that is missing
        print(f"FAILED: {type(e).__name__}: {e}\n(logs in {d})")
        return 1
    finally:
        cluster.stop()
        for marker in ("srun_run", "batch_run", "cancelled_run"):
            for pid in run_files.processes_of(d / marker):
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass


if __name__ == "__main__":
    sys.exit(main())
