"""Unpacks Fashion-MNIST into a dataset directory, once, atomically.

    prepare_fashion_mnist.py DEST [--source DIR]

DEST ends up holding torchvision's layout, DEST/FashionMNIST/raw/<IDX files, unpacked>,
so both mnist_ddp.py --data-dir DEST and torchvision.datasets.FashionMNIST(root=DEST,
download=False) read it. The files come from --source (default: Debian's
dataset-fashion-mnist package, /usr/share/datasets/fashion-mnist); nothing is downloaded.

Meant as drun's node setup step, which runs once per node before any worker starts:

    drun --standalone --nproc-per-node 4 \\
         --node-setup 'python3 examples/prepare_fashion_mnist.py /tmp/fmnist' \\
         examples/mnist_ddp.py --data-dir /tmp/fmnist

It is also safe to run it from several processes at once: each writes into its own
temporary directory next to DEST and renames it into place; the rename is atomic, a
loser sees DEST already there and just removes its copy. A reader never sees a
half-written DEST. If DEST is already complete, nothing is done.
"""
import argparse
import errno
import gzip
import os
import shutil
import sys
import tempfile

DEFAULT_SOURCE = "/usr/share/datasets/fashion-mnist"
NAMES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def raw_dir(root):
    return os.path.join(root, "FashionMNIST", "raw")


def complete(root):
    return all(os.path.isfile(os.path.join(raw_dir(root), name)) for name in NAMES)


def unpack(source, name, dest_folder):
    gz = os.path.join(source, name + ".gz")
    plain = os.path.join(source, name)
    target = os.path.join(dest_folder, name)
    if os.path.isfile(gz):
        with gzip.open(gz, "rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    elif os.path.isfile(plain):
        shutil.copyfile(plain, target)
    else:
        raise FileNotFoundError(f"{name}[.gz] not found in {source}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", help="dataset root to create (the --data-dir of mnist_ddp.py)")
    parser.add_argument("--source", default=DEFAULT_SOURCE,
                        help=f"directory with the IDX files, gzipped or not (default {DEFAULT_SOURCE})")
    args = parser.parse_args()
    dest = os.path.abspath(args.dest)

    if complete(dest):
        print(f"prepare_fashion_mnist: {dest} is ready already")
        return 0
    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".fashion-mnist.", dir=parent)  # same file system: rename is atomic
    try:
        os.makedirs(raw_dir(tmp))
        for name in NAMES:
            unpack(args.source, name, raw_dir(tmp))
        os.chmod(tmp, 0o755)  # mkdtemp made it 0700
        try:
            os.rename(tmp, dest)  # replaces DEST only if it is an empty directory
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            if not complete(dest):
                print(f"prepare_fashion_mnist: {dest} exists and is not a complete dataset; "
                      f"remove it or choose another directory", file=sys.stderr)
                return 1
            print(f"prepare_fashion_mnist: {dest} was prepared concurrently; using it")
            return 0
        tmp = None
    except FileNotFoundError as e:
        print(f"prepare_fashion_mnist: {e}", file=sys.stderr)
        return 1
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"prepare_fashion_mnist: unpacked Fashion-MNIST into {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
