#!/usr/bin/env python3
"""Compiles the C++ blocks of the documentation that say they compile.

    check_doc_blocks.py --kind host|cuda --include DIR --work DIR
                        [--cxx g++] [--nvcc PATH] [--min-blocks N] FILE.md|DIR ...

A fenced block whose info string is `cpp` followed by `compile=host` or
`compile=cuda` is a whole translation unit, compiled as written:

    ```cpp compile=host          g++ -std=c++17 -Wall -Wextra -Werror -I include,
                                 linked; with `run` it is also run and must exit 0
    ```cpp compile=cuda          nvcc -std=c++17 -arch=sm_90a -c -I include

Every other C++ block (`cpp`, `c++`, `cpp fragment`, ...) is a fragment and
is skipped; the run lists each skip with its reason. DIR arguments stand for
the *.md files in them. --kind picks which blocks this run compiles; a cuda
run without nvcc exits 77 (skipped). Exit status 1 when a block does not
compile (or a run block fails), or when fewer than --min-blocks blocks of the
kind were found; with --expect-failure (the self-test on a planted broken
block), 0 only when some block failed.
"""
import argparse
import os
import re
import subprocess
import sys

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)\s*(.*)$")
CPP_LANGS = {"cpp", "c++", "cxx", "cc", "cuda", "cu"}
SKIPPED = 77


def blocks(path):
    """Yields (line, lang, words, code) for every fenced block of a markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang, rest = m.groups()
        start = i + 1
        body = []
        i += 1
        while i < len(lines):
            close = lines[i].strip()
            if close.startswith(fence[0] * len(fence)) and close.strip(fence[0]) == "":
                break
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        yield start, lang.lower(), rest.split(), "\n".join(body) + "\n"


def markdown_files(args):
    for a in args:
        if os.path.isdir(a):
            for name in sorted(os.listdir(a)):
                if name.endswith(".md"):
                    yield os.path.join(a, name)
        else:
            yield a


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=["host", "cuda"], required=True)
    p.add_argument("--include", required=True, help="the library's include directory")
    p.add_argument("--work", required=True, help="where the extracted sources and objects go")
    p.add_argument("--cxx", default="g++")
    p.add_argument("--nvcc", default="")
    p.add_argument("--skip-reason", default="no nvcc given",
                   help="what a cuda run without --nvcc prints as the reason it skips")
    p.add_argument("--min-blocks", type=int, default=0)
    p.add_argument("--expect-failure", action="store_true",
                   help="the self-test: exit 0 only when some block fails to compile")
    p.add_argument("files", nargs="+")
    a = p.parse_args()

    if a.kind == "cuda" and not a.nvcc:
        print(f"doc blocks (cuda): skipped: {a.skip_reason}")
        return SKIPPED
    os.makedirs(a.work, exist_ok=True)
    found = failed = 0
    for md in markdown_files(a.files):
        rel = os.path.relpath(md)
        for line, lang, words, code in blocks(md):
            if lang not in CPP_LANGS:
                continue
            kinds = [w.split("=", 1)[1] for w in words if w.startswith("compile=")]
            where = f"{rel}:{line}"
            if not kinds:
                reason = "a fragment" if "fragment" in words else "unmarked: treated as a fragment"
                print(f"skip     {where} ({reason})")
                continue
            kind = kinds[0]
            if kind not in ("host", "cuda"):
                print(f"FAIL     {where}: unknown compile={kind} (host or cuda)")
                failed += 1
                continue
            if kind != a.kind:
                continue
            found += 1
            stem = re.sub(r"[^A-Za-z0-9]+", "_", rel).strip("_") + f"_{line}"
            src = os.path.join(a.work, stem + (".cpp" if kind == "host" else ".cu"))
            with open(src, "w", encoding="utf-8") as f:
                f.write(f"// {where}\n{code}")
            if kind == "host":
                exe = os.path.join(a.work, stem)
                cmd = [a.cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", a.include, src, "-o", exe]
            else:
                cmd = [a.nvcc, "-std=c++17", "-arch=sm_90a", "-I", a.include, "-c", src,
                       "-o", os.path.join(a.work, stem + ".o")]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                failed += 1
                print(f"FAIL     {where}: does not compile ({' '.join(cmd)})")
                print((r.stdout + r.stderr).rstrip())
                continue
            if kind == "host" and "run" in words:
                r = subprocess.run([exe], capture_output=True, text=True, timeout=120)
                if r.returncode != 0:
                    failed += 1
                    print(f"FAIL     {where}: compiles, but its run exits {r.returncode}")
                    print((r.stdout + r.stderr).rstrip())
                    continue
                print(f"ok       {where} (compiled, linked and ran)")
            else:
                print(f"ok       {where} (compiled)")
    print(f"doc blocks ({a.kind}): {found} checked, {failed} failed")
    if a.expect_failure:
        print("expected a failure: " + ("seen" if failed else "NOT seen"))
        return 0 if failed else 1
    if found < a.min_blocks:
        print(f"FAIL: {found} compile={a.kind} blocks found, at least {a.min_blocks} expected")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
