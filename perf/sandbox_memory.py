"""Peak memory of the scoring process while a sandboxed answer floods its stdout.

Each variant runs in a fresh Python process (its VmHWM, the peak RSS, is that run's alone) whose
address space is capped at ``--cap-gb`` so that a sandbox that buffers everything fails
with MemoryError instead of taking the machine down. Prints ONE JSON object on stdout:
per variant the scoring process's peak RSS before and after the job (MiB), the wall
time, and what the sandbox said (killed for output, bytes dropped).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

FLOODS = {
    "sys_stdout_write": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
    "os_write_fd1": "import os\nb = b'x' * 65536\nwhile True:\n    os.write(1, b)",
}

_PROBE = r"""
import json, resource, sys, time
from evalkit.scoring.sandbox import Limits, run_job
def peak_mib():  # this process's own peak (ru_maxrss would include a forking parent's)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
cap = int(float(sys.argv[2]) * (1 << 30))
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
before = peak_mib() * 1024
t = time.monotonic()
out = {"before_mib": before / 1024}
try:
    run = run_job({"kind": "python", "code": sys.argv[1], "tests": ["pass"]},
                  Limits(wall_s=float(sys.argv[3])))
    out.update(result=run.result, timed_out=run.timed_out,
               output_exceeded=getattr(run, "output_exceeded", None),
               output_total=getattr(run, "output_total", None))
except MemoryError:
    out["error"] = "MemoryError: the scoring process hit its address-space cap"
out["wall_s"] = round(time.monotonic() - t, 2)
out["peak_mib"] = peak_mib()
print(json.dumps(out))
"""


def main() -> None:
    """Run both flood variants and print the scoring process's peak RSS as JSON."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--wall-s", type=float, default=10.0, help="sandbox wall-clock limit")
    ap.add_argument("--cap-gb", type=float, default=4.0, help="address-space cap of the probe")
    args = ap.parse_args()
    figures = {}
    for name, code in FLOODS.items():
        cmd = [sys.executable, "-c", _PROBE, code, str(args.cap_gb), str(args.wall_s)]
        got = subprocess.run(cmd, capture_output=True, text=True, timeout=args.wall_s + 60)
        lines = got.stdout.strip().splitlines()
        figures[name] = json.loads(lines[-1]) if lines else {"stderr": got.stderr[-500:]}
        print(name, figures[name], file=sys.stderr)
    print(json.dumps({"wall_s": args.wall_s, "cap_gb": args.cap_gb, "floods": figures}))


if __name__ == "__main__":
    main()
