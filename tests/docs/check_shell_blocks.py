#!/usr/bin/env python3
"""Holds every shell block of the documentation to something that runs it.

    check_shell_blocks.py --ci-script .ci/run [--run] [--expect-failures N] FILE.md|DIR ...

A fenced block whose language is sh, bash or shell names, after the
language, how it is held (the first word; the rest is a reason for people):

    ```sh install      package installs (apt-get install, pip install) that
                       the CI script installs too: every package it names,
                       pins included, is in one of the script's install lines
    ```sh ci           commands the CI script runs as written: every command
                       line is a line of the script
    ```sh run          commands this check runs as written (bash -euo pipefail,
                       from the repository's root), with --run; without it they
                       are listed as not run
    ```sh by-hand      commands no machine without a GPU can run (or that
                       repeat a longer build CI does another way): listed with
                       their reason, run by hand before a release

A block with none of these fails the check, so that no command is left
unheld. Comments (# ...) and backslash continuations are read as the shell
reads them. Exit status 1 when a block fails; with --expect-failures N (the
self-test on planted blocks), 0 only when exactly N blocks failed.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_doc_blocks import blocks, markdown_files  # noqa: E402

SHELL_LANGS = {"sh", "bash", "shell"}
KINDS = ("install", "ci", "run", "by-hand")


def command_lines(code):
    """The block's commands: continuations joined, comments and blank lines
    dropped, each line's whitespace collapsed."""
    joined = re.sub(r"\\\n\s*", " ", code)
    out = []
    for line in joined.split("\n"):
        words = shlex.split(line, comments=True)
        if words:
            out.append(" ".join(words))
    return out


def installs(lines):
    """(tool, package) for each package of the apt-get / pip install commands
    of `lines` (commands joined by && are split; options are skipped)."""
    found = []
    for line in lines:
        for cmd in line.split("&&"):
            words = cmd.split()
            if words[:1] == ["sudo"]:
                words = words[1:]
            if words[:2] in (["apt-get", "install"], ["apt", "install"]):
                tool, rest = "apt", words[2:]
            elif words[:2] == ["pip", "install"] or words[:4] == ["python3", "-m", "pip", "install"]:
                tool, rest = "pip", words[2:] if words[0] == "pip" else words[4:]
            else:
                found.append((None, cmd.strip()))
                continue
            found += [(tool, w) for w in rest if not w.startswith("-") and w not in (">", "/dev/null")]
    return found


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ci-script", required=True, help="the CI script the install and ci blocks are held to")
    p.add_argument("--run", action="store_true", help="run the `run` blocks (else list them)")
    p.add_argument("--root", default=".", help="where `run` blocks run (the repository's root)")
    p.add_argument("--expect-failures", type=int, default=-1)
    p.add_argument("files", nargs="+")
    a = p.parse_args()

    ci = command_lines(open(a.ci_script, encoding="utf-8").read())
    ci_set = set(ci)
    ci_packages = {pkg for tool, pkg in installs(ci) if tool}
    counts = {k: 0 for k in KINDS}
    failed = 0
    for md in markdown_files(a.files):
        rel = os.path.relpath(md)
        for line, lang, words, code in blocks(md):
            if lang not in SHELL_LANGS:
                continue
            where = f"{rel}:{line}"
            kind = words[0].rstrip(":") if words else ""
            if kind not in KINDS:
                failed += 1
                print(f"FAIL     {where}: a shell block says how it is held: ```sh " + " | ".join(KINDS))
                continue
            counts[kind] += 1
            lines = command_lines(code)
            if kind in ("install", "ci"):
                # what the CI script does not do of the block, and how it is said
                if kind == "install":
                    bad = [pkg for tool, pkg in installs(lines) if tool is None or pkg not in ci_packages]
                    not_held, held = "not installed by", "every package is installed by"
                else:
                    bad = [c for c in lines if c not in ci_set]
                    not_held, held = "not run as written by", "run as written by"
                if bad:
                    failed += 1
                    print(f"FAIL     {where}: {not_held} {a.ci_script}: {'; '.join(bad)}")
                else:
                    print(f"ok       {where} ({held} {a.ci_script})")
            elif kind == "by-hand":
                reason = " ".join(words[1:])
                if not reason:
                    failed += 1
                    print(f"FAIL     {where}: a by-hand block gives its reason after the word")
                else:
                    print(f"by hand  {where} ({reason}): {'; '.join(lines)}")
            elif not a.run:
                print(f"not run  {where} (without --run): {'; '.join(lines)}")
            else:
                r = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=a.root, capture_output=True,
                                   text=True, timeout=1200)
                if r.returncode != 0:
                    failed += 1
                    print(f"FAIL     {where}: exits {r.returncode}")
                    print((r.stdout + r.stderr).rstrip()[-4000:])
                else:
                    print(f"ok       {where} (ran: {'; '.join(lines)})")
    print("shell blocks: " + ", ".join(f"{n} {k}" for k, n in counts.items()) + f"; {failed} failed")
    if a.expect_failures >= 0:
        print(f"expected {a.expect_failures} failures: " + ("seen" if failed == a.expect_failures else "NOT seen"))
        return 0 if failed == a.expect_failures else 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
