"""python -m contactkit --solver ipm [--set key=value ...] script.py [args...]

Runs an unmodified Python program with mujoco.mj_step and mujoco.mj_forward replaced by
contactkit's pipeline (contactkit.patch)."""

from __future__ import annotations

import argparse
import runpy
import sys

from . import patch, setting_keys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m contactkit",
        description="Run a Python program with MuJoCo's constraint solver swapped for contactkit's.")
    parser.add_argument("--solver", help="mujoco, ipm, comfree or lcp (default: each model's own)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any contactkit setting (repeatable)")
    parser.add_argument("--list-settings", action="store_true", help="print every setting key")
    parser.add_argument("script", nargs="?", help="the Python program to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    a = parser.parse_args(argv)
    if a.list_settings:
        for key, doc in setting_keys().items():
            print(f"{key:24s} {doc}")
        return 0
    if not a.script:
        parser.error("a script to run is required")
    settings = {}
    for item in a.set:
        if "=" not in item:
            parser.error(f"--set {item!r} is not KEY=VALUE")
        key, value = item.split("=", 1)
        settings[key.strip()] = value.strip()
    try:
        patch(a.solver, **settings)
    except ValueError as e:
        print(f"contactkit: {e}", file=sys.stderr)
        return 2
    sys.argv = [a.script] + a.args
    runpy.run_path(a.script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
