"""Two steps of benchmarks/gpu_prepare.sh, on what a GPU check carries to a lent machine:

    python benchmarks/gpu_wheels.py slim .whl/bitsandbytes-*.whl --keep cpu cuda13
    python benchmarks/gpu_wheels.py size . --limit-mib 64 --exclude .git .venv

``slim`` rewrites a wheel without the native libraries the machine does not load: bitsandbytes ships one
``libbitsandbytes_<backend>.so`` per CUDA, ROCm and XPU version (43 MB in all), and a device call carries 64 MiB.
A library is kept when its backend starts with one of ``--keep``; the wheel's RECORD loses the lines of what went,
so pip installs it as any wheel. ``size`` sums what a device call carries from the repository: the files git would
copy (tracked, and untracked ones it does not ignore) plus the ignored folders named on the command line's carry
(``.whl``, ``.gpu``), and exits 1 past the limit.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from pathlib import Path

NATIVE = re.compile(r"^(?P<package>[^/]+)/lib\w+?_(?P<backend>[a-z]+\d*)\.so$")
CARRIED = (".whl", ".gpu")  # the ignored folders the device call names in carry


def slim(wheel: Path, keep: list[str]) -> list[str]:
    """Rewrite ``wheel`` in place without the native libraries whose backend matches none of ``keep``; the names of
    what went."""
    dropped = []
    with zipfile.ZipFile(wheel) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    for info, _ in entries:
        found = NATIVE.match(info.filename)
        if found and not any(found["backend"].startswith(token) for token in keep):
            dropped.append(info.filename)
    slimmed = wheel.with_suffix(".slim")
    with zipfile.ZipFile(slimmed, "w", zipfile.ZIP_DEFLATED) as target:
        for info, data in entries:
            if info.filename in dropped:
                continue
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if line.split(",")[0] not in dropped).encode()
            target.writestr(info, data)
    slimmed.replace(wheel)
    return dropped


def carried_bytes(root: Path, exclude: list[str]) -> int:
    """The bytes a device call carries from ``root``: git's tracked and unignored files, and the CARRIED folders."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    files = {root / name for name in listed if name and name.split("/")[0] not in exclude}
    for folder in CARRIED:
        files |= {path for path in (root / folder).rglob("*")}
    return sum(path.stat().st_size for path in files if path.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    slim_step = steps.add_parser("slim", help="drop the native libraries of other backends from a wheel")
    slim_step.add_argument("wheel", type=Path)
    slim_step.add_argument("--keep", nargs="+", required=True, help="backends kept: cpu cuda13 ...")
    size_step = steps.add_parser("size", help="what a device call carries, against its limit")
    size_step.add_argument("root", type=Path)
    size_step.add_argument("--limit-mib", type=float, default=64.0)
    size_step.add_argument("--exclude", nargs="*", default=[".git", ".venv"])
    args = parser.parse_args()
    if args.step == "slim":
        before = args.wheel.stat().st_size
        dropped = slim(args.wheel, args.keep)
        print(
            f"{args.wheel.name}: {before / 2**20:.1f} -> {args.wheel.stat().st_size / 2**20:.1f} MiB "
            f"({len(dropped)} libraries dropped; kept {', '.join(args.keep)})"
        )
        return 0
    size = carried_bytes(args.root.resolve(), args.exclude) / 2**20
    fits = size <= args.limit_mib
    print(f"a device call carries {size:.1f} MiB of the {args.limit_mib:g} MiB it may: {'fits' if fits else 'TOO BIG'}")
    return 0 if fits else 1


if __name__ == "__main__":
    sys.exit(main())
