# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Read-only probe of the rdma_ofed role (module rdma_ofed_probe): the installed version of each
package (dpkg, else rpm) and the installed OFED (ofed_info -s, which only MLNX_OFED/DOCA carry).
Answers in the tools' own words; the package_versions, ofed_info and *_plan filters decide on
the control host."""
from __future__ import annotations

import os
import shutil
import subprocess


def _run(argv):
    return subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, "LC_ALL": "C"})


def probe(packages):
    out = {"packages_stdout": "", "ofed_info": ""}
    if packages and shutil.which("dpkg-query"):
        proc = _run(["dpkg-query", "-W", "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n", "--",
                     *packages])
        # rc 1: some package is unknown to dpkg, i.e. not installed; that is an answer.
        if proc.returncode > 1:
            return {"error": f"dpkg-query failed (exit {proc.returncode}): {proc.stderr.strip()}"}
        out["packages_stdout"] = proc.stdout
    elif packages and shutil.which("rpm"):
        proc = _run(["rpm", "-q", "--queryformat", "%{NAME}\t%{VERSION}-%{RELEASE}\tii\n",
                     *packages])
        # rpm's rc counts the packages that are not installed; its stdout names them.
        if proc.returncode != 0 and "is not installed" not in proc.stdout:
            return {"error": f"rpm -q failed (exit {proc.returncode}): {proc.stderr.strip()}"}
        out["packages_stdout"] = proc.stdout
    elif packages:
        return {"error": "neither dpkg-query nor rpm is installed: cannot read package versions"}
    if shutil.which("ofed_info"):
        out["ofed_info"] = _run(["ofed_info", "-s"]).stdout
    return out
