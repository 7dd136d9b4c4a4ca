#!/usr/bin/env python3
"""Checks ELF files the way auditwheel checks a manylinux wheel: every symbol version an
executable or shared library imports from glibc is at most the floor (default 2.28, the
manylinux_2_28 policy of PyTorch's wheels), and every library it needs is either glibc's
own or bundled beside it (found through an $ORIGIN RUNPATH inside the checked tree).

Usage: packaging/check_glibc_floor.py [--floor 2.28] PATH...
PATH: ELF files, or directories searched for them (non-ELF files are skipped; a .whl or
.tar.gz is unpacked into a temporary directory first). Prints one line per ELF file (its
newest glibc version and needed libraries) and one line per problem; exit 0 when there is
none, 1 naming each, 2 on bad input. Needs readelf and objdump (binutils).
"""
import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile

# glibc's own libraries (what auditwheel's manylinux policies allow besides libstdc++,
# libgcc_s and a few X11 ones, which drun does not use).
GLIBC_LIBS = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
              "libresolv.so.2", "libutil.so.1", "libnsl.so.1", "libanl.so.1",
              "ld-linux-x86-64.so.2"}
VERSION = re.compile(r"\bGLIBC_(\d+)\.(\d+)(?:\.(\d+))?\b")


def parse_floor(text):
    m = re.fullmatch(r"(\d+)\.(\d+)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"--floor {text}: write MAJOR.MINOR, e.g. 2.28")
    return (int(m.group(1)), int(m.group(2)), 0)


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def run(argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def glibc_imports(path):
    """{symbol: (major, minor, patch)} of the undefined symbols with a GLIBC_ version."""
    out = {}
    for line in run(["objdump", "-T", path]).splitlines():
        if "*UND*" not in line:
            continue
        m = VERSION.search(line)
        if m:
            out[line.split()[-1]] = tuple(int(g or 0) for g in m.groups())
    return out


def dynamic(path):
    """(needed libraries, runpath entries) from the dynamic section."""
    needed, runpath = [], []
    for line in run(["readelf", "-d", "-W", path]).splitlines():
        m = re.search(r"\((NEEDED|RUNPATH|RPATH)\).*\[(.*)\]", line)
        if not m:
            continue
        if m.group(1) == "NEEDED":
            needed.append(m.group(2))
        else:
            runpath += m.group(2).split(":")
    return needed, runpath


def bundled(lib, elf, runpath, root):
    """Whether `lib` is found through an $ORIGIN entry of `runpath`, inside `root`."""
    origin = os.path.dirname(os.path.abspath(elf))
    for entry in runpath:
        if "$ORIGIN" not in entry and "${ORIGIN}" not in entry:
            continue
        d = os.path.normpath(entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin))
        if os.path.commonpath([d, root]) == root and os.path.exists(os.path.join(d, lib)):
            return True
    return False


def check_elf(path, root, floor):
    problems = []
    imports = glibc_imports(path)
    newest = max(imports.values(), default=(0, 0, 0))
    for sym, ver in sorted(imports.items()):
        if ver > floor:
            problems.append(f"{path}: imports {sym}@GLIBC_{'.'.join(map(str, ver)).removesuffix('.0')}, "
                            f"newer than GLIBC_{floor[0]}.{floor[1]}")
    needed, runpath = dynamic(path)
    for lib in needed:
        if lib not in GLIBC_LIBS and not bundled(lib, path, runpath, root):
            problems.append(f"{path}: needs {lib}, neither glibc's nor bundled beside it "
                            f"($ORIGIN RUNPATH)")
    print(f"{path}: newest GLIBC_{newest[0]}.{newest[1]}, needs {' '.join(needed) or 'nothing'}")
    return problems


def elf_files(root):
    if os.path.isfile(root):
        return [root] if is_elf(root) else []
    found = []
    for d, _, files in os.walk(root):
        found += [os.path.join(d, f) for f in sorted(files)
                  if not os.path.islink(os.path.join(d, f)) and is_elf(os.path.join(d, f))]
    return found


def unpacked(path, tmp):
    """A directory holding the contents of a .whl or .tar.gz, or `path` itself."""
    if path.endswith(".whl"):
        dest = os.path.join(tmp, os.path.basename(path))
        with zipfile.ZipFile(path) as z:
            z.extractall(dest)
        return dest
    if path.endswith((".tar.gz", ".tgz")):
        dest = os.path.join(tmp, os.path.basename(path))
        with tarfile.open(path) as t:
            t.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(dest)
        return dest
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--floor", type=parse_floor, default=(2, 28, 0))
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    problems, count = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for p in args.paths:
            if not os.path.exists(p):
                print(f"check_glibc_floor: {p}: no such file or directory", file=sys.stderr)
                return 2
            root = os.path.abspath(unpacked(p, tmp))
            for elf in elf_files(root):
                count += 1
                problems += check_elf(elf, root if os.path.isdir(root) else os.path.dirname(root),
                                      args.floor)
    if count == 0:
        print("check_glibc_floor: no ELF file in " + " ".join(args.paths), file=sys.stderr)
        return 2
    for line in problems:
        print(line)
    floor = f"GLIBC_{args.floor[0]}.{args.floor[1]}"
    print(f"check_glibc_floor: {count} ELF files, {len(problems)} problems (floor {floor})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
