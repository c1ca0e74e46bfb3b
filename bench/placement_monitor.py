"""bench/core_probe as a monitor beside a bench script's runs: where the host had the two
virtual CPUs while each run went (near, apart, mixed; compare_peers.py's labels). Used by
ddp_scaling.py and dtype_rates.py; compare_peers.sh starts its own from the shell.

    monitor = PlacementMonitor(build_dir)
    ... runs, each with its (start, end) unix times ...
    samples = monitor.stop()
    state = compare_peers.state_of((start, end), samples)   # None when there is no monitor

Does nothing where the probe is not built or this process may use fewer than two CPUs.
Standard library only.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_peers  # noqa: E402  (the placement log's reading and labels)

PERIOD_S = "0.25"


class PlacementMonitor:
    def __init__(self, build_dir):
        self.dir = tempfile.TemporaryDirectory()
        self.proc = None
        probe = os.path.join(build_dir, "bench", "core_probe")
        if os.path.exists(probe) and len(os.sched_getaffinity(0)) >= 2:
            self.log = open(os.path.join(self.dir.name, "placement.log"), "w")
            self.proc = subprocess.Popen([probe, "--every", PERIOD_S, "--for", "86400"],
                                         stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self):
        """Stops the monitor; its samples [(unix time, round trip ns)], or None without one."""
        if self.proc is None:
            return None
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return compare_peers.read_placement(self.dir.name)
