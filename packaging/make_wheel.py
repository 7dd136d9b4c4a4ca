#!/usr/bin/env python3
"""Packs an installed drun tree (bin/drun, lib/drun/drun-net, share/...) as a wheel:
OUTDIR/drun-VERSION-py3-none-manylinux_2_28_x86_64.whl.

Usage: packaging/make_wheel.py --version VERSION --tree DIR --out OUTDIR
(packaging/make_release.sh calls it.) The wheel holds no Python package, only data: pip
puts bin/drun in the environment's bin/ (the "scripts" of the wheel, executable, on PATH
once the environment is activated or named) and the rest under the environment's prefix
(lib/drun/drun-net beside it, where bin/drun looks: ../lib/drun), so
`pip install --no-index drun-*.whl` into a venv or conda env gives <env>/bin/drun, which
runs its workers with <env>/bin/python3 by default (agent/entrypoint.h EnvironmentPython).
lib/drun/drun-build says "wheel" (drun --version).
"""
import argparse
import base64
import hashlib
import os
import sys
import zipfile

TAG = "py3-none-manylinux_2_28_x86_64"


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def add(z, records, arcname, data, executable):
    info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    z.writestr(info, data)
    records.append(record_line(arcname, data))


def tree_files(tree):
    for d, _, files in os.walk(tree):
        for f in sorted(files):
            path = os.path.join(d, f)
            yield os.path.relpath(path, tree), path


def metadata(version):
    return (f"Metadata-Version: 2.1\nName: drun\nVersion: {version}\n"
            "Summary: Launcher for distributed PyTorch jobs (a torchrun replacement)\n"
            "License: see share/doc/drun\n").encode()


def wheel_file():
    return (f"Wheel-Version: 1.0\nGenerator: drun packaging/make_wheel.py\n"
            f"Root-Is-Purelib: false\nTag: {TAG}\n").encode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", required=True)
    ap.add_argument("--tree", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if not os.access(os.path.join(args.tree, "bin", "drun"), os.X_OK):
        print(f"make_wheel: {args.tree}/bin/drun: not an executable", file=sys.stderr)
        return 2
    name = f"drun-{args.version}"
    path = os.path.join(args.out, f"{name}-{TAG}.whl")
    records = []
    with zipfile.ZipFile(path, "w") as z:
        for rel, full in tree_files(args.tree):
            if rel == "lib/drun/drun-build":
                continue  # written below: this install is a wheel
            top, _, rest = rel.partition("/")
            arc = f"{name}.data/scripts/{rest}" if top == "bin" else f"{name}.data/data/{rel}"
            with open(full, "rb") as f:
                add(z, records, arc, f.read(), os.access(full, os.X_OK))
        add(z, records, f"{name}.data/data/lib/drun/drun-build", b"wheel\n", False)
        add(z, records, f"{name}.dist-info/METADATA", metadata(args.version), False)
        add(z, records, f"{name}.dist-info/WHEEL", wheel_file(), False)
        rec = f"{name}.dist-info/RECORD"
        z.writestr(zipfile.ZipInfo(rec, date_time=(2026, 1, 1, 0, 0, 0)),
                   "\n".join(records + [f"{rec},,"]) + "\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
