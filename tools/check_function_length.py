#!/usr/bin/env python3
# Copyright 2026 The contactkit developers.
"""Lists C and C++ functions longer than a limit (default 120 lines, signature to closing brace).

usage: tools/check_function_length.py [--limit N] [--check] [PATH...]
       (default paths: plugin solvers tools python, without plugin/deriv and solvers/lcp)
--check: exit 1 if a function over the limit is not in KEPT (ctest function_length runs this)

Reads braces outside comments, strings and character literals: a brace opened at namespace or
class level after a header with a parenthesis starts a function (lambdas and blocks inside it
count as its lines). Prints "lines path:line name", longest first; exits 0.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PATHS = ["plugin", "solvers", "tools", "python"]
DEFAULT_EXCLUDE = ["plugin/deriv", "solvers/lcp"]
SUFFIXES = (".c", ".cc", ".cpp", ".h", ".hpp")
# functions left long on purpose, with the reason
KEPT = {
    "IpmSolver::Attempt": "one Mehrotra iteration loop in the solver's hot path, read top to bottom",
}
CONTAINER = re.compile(r"\b(namespace|class|struct|union|extern\s+\"C\")\b[^()]*$")


def strip(text):
    """text with comments, strings and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            k = text.find("(", i)
            end = ")" + text[i + 2:k] + '"'
            j = text.find(end, k)
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(first line, last line, name) of each function defined in the file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip(f.read())
    found = []
    stack = []  # per open brace: "container", "function" or "block"
    header_start = 0  # where the text before the next brace begins
    start_line = None
    for i, c in enumerate(text):
        if c in ";":
            if all(k == "container" for k in stack):
                header_start = i + 1
        elif c == "{":
            header = text[header_start:i]
            at_top = all(k == "container" for k in stack)
            if at_top and CONTAINER.search(" ".join(header.split())):
                stack.append("container")
                header_start = i + 1
            elif at_top and "(" in header and not re.search(r"=\s*$", header):
                stack.append("function")
                lead = len(header) - len(header.lstrip())
                start_line = text.count("\n", 0, header_start + lead) + 1
                sig = " ".join(header.split())
                name = re.findall(r"([~\w:]+(?:operator\S*)?)\s*\(", sig)
                found.append([start_line, None, name[0] if name else sig[:40]])
            else:
                stack.append("block")
        elif c == "}":
            kind = stack.pop() if stack else "block"
            if kind == "function":
                found[-1][1] = text.count("\n", 0, i) + 1
            if all(k == "container" for k in stack):
                header_start = i + 1
    return [tuple(f) for f in found if f[1] is not None]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=120)
    ap.add_argument("--check", action="store_true", help="exit 1 on a long function not in KEPT")
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args()
    paths = args.paths or DEFAULT_PATHS
    exclude = [] if args.paths else [os.path.join(ROOT, e) for e in DEFAULT_EXCLUDE]
    long = []
    for p in paths:
        p = os.path.join(ROOT, p) if not os.path.isabs(p) else p
        files = [p] if os.path.isfile(p) else [
            os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs if f.endswith(SUFFIXES)]
        for f in sorted(files):
            if any(f.startswith(e + os.sep) for e in exclude):
                continue
            for first, last, name in functions(f):
                if last - first + 1 > args.limit:
                    long.append((last - first + 1, os.path.relpath(f, ROOT), first, name))
    new = 0
    for n, f, line, name in sorted(long, reverse=True):
        kept = KEPT.get(name)
        new += kept is None
        print(f"{n:5d} {f}:{line} {name}" + (f"  (kept: {kept})" if kept else ""))
    return 1 if args.check and new else 0


if __name__ == "__main__":
    sys.exit(main())
