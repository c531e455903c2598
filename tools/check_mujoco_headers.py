#!/usr/bin/env python3
# Copyright 2026 The contactkit developers.
"""Compile every contactkit source against another MuJoCo's headers (syntax only, nothing linked).

Catches API drift between MuJoCo versions (renamed fields, changed signatures, 64-bit sizes) without
building that MuJoCo: takes the compile commands of an existing build of this repository and puts
the given include directory first.

usage: tools/check_mujoco_headers.py MUJOCO_INCLUDE_DIR [BUILD_DIR]
  MUJOCO_INCLUDE_DIR  directory holding mujoco/mujoco.h (e.g. <mujoco-3.x>/include)
  BUILD_DIR           a configured build of this repository (default: build); CMake writes its
                      compile_commands.json there
Prints each distinct error and exits 1 if there is any, 2 on bad arguments.
"""
import json
import os
import shlex
import subprocess
import sys


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) >= 2 else 2
    inc = os.path.abspath(sys.argv[1])
    build = sys.argv[2] if len(sys.argv) > 2 else "build"
    if not os.path.isfile(os.path.join(inc, "mujoco", "mujoco.h")):
        print(f"check_mujoco_headers: no mujoco/mujoco.h under {inc}", file=sys.stderr)
        return 2
    db = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(db):
        print(f"check_mujoco_headers: {db} not found (configure the build first: tools/ck.sh build)",
              file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(db) as f:
        commands = json.load(f)
    with open(os.path.join(inc, "mujoco", "mujoco.h")) as f:
        version = next((l.split()[2] for l in f if l.startswith("#define mjVERSION_HEADER")), "?")
    errors, checked = [], 0
    for entry in commands:
        path = entry["file"]
        if not path.startswith(root + os.sep) or "/build" in path[len(root):]:
            continue
        args, skip = [], False
        for a in shlex.split(entry["command"]):
            if skip:
                skip = False
            elif a in ("-o", "-MF", "-MT", "-MQ"):
                skip = True
            elif a not in ("-c", "-MD", "-MMD"):
                args.append(a)
        cmd = [args[0], "-isystem", inc, "-fsyntax-only"] + args[1:]
        run = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
        checked += 1
        for line in run.stderr.splitlines():
            line = line.replace(root + os.sep, "")
            if ": error:" in line and line not in errors:
                errors.append(line)
    print("\n".join(errors))
    print(f"{checked} sources against mjVERSION_HEADER {version}: {len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
