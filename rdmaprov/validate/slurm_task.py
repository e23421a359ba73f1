"""One node's part of `rdmaprov validate --launcher slurm`, run by srun on every allocated node.

Standard library only, Python >= 3.9: it runs with the python that runs the worker (the node's,
or an image's under Pyxis), beside worker.py and the files beside it (slurm.worker_files()), which
srun's stdin brought to every node with this file and ``plans.json``. The plan of this node
(``SLURMD_NODENAME``) was built on the submit host by plugins/module_utils/validate_launch.py's
``launch()``, the function the nccl_validate role's launch uses, so the argv is the same.

What it does is the role's "Start" and "Fetch" steps: a fresh run directory, ``argv.txt``, the
launch under ``timeout -k 15 <timeout>`` with stdout to ``result.json`` and stderr appended to
``worker.log``, the exit status in ``rc``; then the files the judge reads, as a gzipped tar
(``<node>/<file>``, and the rail round's ``<node>/rails/<file>``) in base64 lines on stdout,
which srun --label hands back per task.

    python3 slurm_task.py BIN_DIR
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

FILES = ("rc", "result.json", "worker.log", "counters_before.json", "counters_after.json",
         "argv.txt")
# The rail round's outputs the worker writes under <run dir>/rails (<hca>.port<N>.round<R>.log,
# ...server, skipped), handed back as <node>/rails/<name>: nothing else. The role's "Rail round
# outputs on the host" step finds the same names (a test holds the two together).
RAILS = "rails"
RAIL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.]{0,127}$")


def run(bin_dir: str, host: str) -> bytes:
    """Run this host's plan; return the tar.gz of its result files."""
    with open(os.path.join(bin_dir, "plans.json")) as fh:
        plans = json.load(fh)
    plan = plans["hosts"][host]
    run_dir = plan["dir"]
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "argv.txt"), "w") as fh:
        fh.write("".join(f"{a}\n" for a in plan["argv"]))
    env = {**os.environ, **plan["env"]}
    argv = ["timeout", "-k", "15", str(int(plans["timeout"])), *plan["argv"]]
    with open(os.path.join(run_dir, "result.json"), "w") as out, \
            open(os.path.join(run_dir, "worker.log"), "a") as err:
        try:
            rc = subprocess.run(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env=env, cwd=run_dir, check=False).returncode
        except OSError as exc:  # no timeout binary, or the launch not runnable: as a shell says
            err.write(json.dumps({"schema": "rdmaprov.validate.worker/1", "ok": False,
                                  "hostname": host, "error": f"cannot start: {exc}"}) + "\n")
            rc = 127
    with open(os.path.join(run_dir, "rc"), "w") as fh:
        fh.write(f"{rc}\n")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in FILES:
            path = os.path.join(run_dir, name)
            if os.path.isfile(path):
                tar.add(path, arcname=f"{host}/{name}")
        rails = os.path.join(run_dir, RAILS)
        for name in sorted(os.listdir(rails)) if os.path.isdir(rails) else []:
            path = os.path.join(rails, name)
            if RAIL_NAME.match(name) and os.path.isfile(path) and not os.path.islink(path):
                tar.add(path, arcname=f"{host}/{RAILS}/{name}")
    return buf.getvalue()


def main(argv: list[str]) -> int:
    host = os.environ.get("SLURMD_NODENAME", "")
    if len(argv) != 1 or not host:
        sys.stderr.write("usage: SLURMD_NODENAME=NODE slurm_task.py BIN_DIR (run by srun)\n")
        return 2
    data = base64.encodebytes(run(argv[0], host)).decode()
    sys.stdout.write(data)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
