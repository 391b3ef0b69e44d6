#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Tree lint: work-log references and missing SPDX lines in tracked files.

The tree describes the product as it is; the history of how it got there
belongs in git. Rules (each finding is printed as path:line: rule: text):

  session-tag  a work-session tag: "s" or "S", one or two digits, an
               optional "-" and an upper-case suffix, as a word
  issue-ref    a tracker reference: the word issue(s), a number
  iso-date     a calendar date written year-month-day
  utc-time     a clock time followed by UTC
  next-step    the words "next step" followed by a colon
  commit-hash  a word of 7 to 12 lower-case hex digits holding both a
               letter and a digit (0x constants are not words of their own)
  spdx         a .c, .h, .py, .sh, meson.build or extensionless #! file
               without "SPDX-License-Identifier:" in its first two lines

What is searched: in C sources and headers only comments and string
literals (a local named like a session tag is code); in Python (by
extension or #! line) comments and strings, found with tokenize; in a
.patch only the lines it adds (its context is upstream's); everywhere
else the whole text. A string literal that is nothing but a word shaped
like a session tag (the name of a port, a dict key) is data, not a tag.
Files that must carry dates (LICENSE, COPYING, debian/changelog, a
.patch, the .TH header line of man pages) are exempt from iso-date and
utc-time.

Without PATHs every file `git ls-files` lists in the work tree (--root,
default: the one holding this script) is checked; PATHs are relative to
it. Exit status: 0 clean, 1 findings, 2 usage or environment error.
"""
import argparse
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

HEX = r"[0-9a-f]"
RULES = [
    ("session-tag", re.compile(r"\b[sS][0-9]{1,2}(?:-[A-Z][A-Z0-9]*)?\b")),
    ("issue-ref", re.compile(r"\b[Ii]ssues?[- ]?#?[0-9]+\b")),
    ("iso-date", re.compile(r"\b(?:19|20)[0-9]{2}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])\b")),
    ("utc-time", re.compile(r"\b[0-9]{1,2}:[0-9]{2}(?::[0-9]{2})? ?UTC\b")),
    ("next-step", re.compile(r"\b[Nn]ext step:")),
    ("commit-hash", re.compile(rf"(?<![\w-]){HEX}{{7,12}}(?![\w-])")),
]
DATED = {"iso-date", "utc-time"}
UUID = re.compile(rf"\b{HEX}{{8}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{12}}\b", re.I)

# Files that must carry dates (licence texts, changelogs, upstream patches).
DATED_FILES = {"LICENSE", "COPYING", "changelog"}
SPDX = "SPDX-License-Identifier:"
SPDX_EXT = {".c", ".h", ".py", ".sh"}


def is_hash(word):
    return any(c.isdigit() for c in word) and any(c.isalpha() for c in word)


# -- what to search in each kind of file --------------------------------------

def c_prose(text):
    """(line, text, literal) of every comment and string or character
    literal of a C source, each line of a multi-line comment on its own;
    literal: the text is a whole string literal's."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append((line, text[i + 2:j], False))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j
            for k, part in enumerate(text[i + 2:j].split("\n")):
                out.append((line + k, part, False))
            line += text.count("\n", i, j)
            i = j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append((line, text[i + 1:j], True))
            i = j + 1
        else:
            i += 1
    return out


LITERAL = re.compile(r"""[rRbBuUfF]{0,2}(['"])(.*)\1""")


def py_prose(text):
    """(line, text, literal) of every comment and string of a Python
    source (the whole text if it does not tokenize); literal: the text is
    a whole one-line string literal's."""
    out = []
    kinds = {tokenize.COMMENT, tokenize.STRING}
    kinds |= {getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type not in kinds:
                continue
            m = LITERAL.fullmatch(tok.string)
            if m and tok.type == tokenize.STRING:
                out.append((tok.start[0], m.group(2), True))
                continue
            for k, part in enumerate(tok.string.split("\n")):
                out.append((tok.start[0] + k, part, False))
    except (tokenize.TokenError, SyntaxError):
        return whole(text)
    return out


def patch_prose(text):
    """(line, text, False) of the lines a patch adds, and of its header."""
    out, body = [], False
    for no, ln in enumerate(text.split("\n"), 1):
        if ln.startswith("--- ") or ln.startswith("diff "):
            body = True
        if not body or (ln.startswith("+") and not ln.startswith("+++")):
            out.append((no, ln, False))
    return out


def whole(text):
    return [(no, ln, False) for no, ln in enumerate(text.split("\n"), 1)]


def is_python(path, text):
    return path.suffix == ".py" or (not path.suffix and
                                    re.match(r"#!.*\bpython", text.split("\n", 1)[0]))


def prose(path, text):
    if path.suffix in (".c", ".h"):
        return c_prose(text)
    if is_python(path, text):
        return py_prose(text)
    if path.suffix == ".patch":
        return patch_prose(text)
    return whole(text)


# -- the checks -------------------------------------------------------------

def dated(rel):
    p = Path(rel)
    return p.name in DATED_FILES or p.suffix == ".patch"


def check_file(root, rel):
    """Findings of one file: [(path, line, rule, text)]."""
    path = root / rel
    try:
        raw = path.read_bytes()
    except (IsADirectoryError, FileNotFoundError):
        return []
    if b"\0" in raw:
        return []                                # binary
    text = raw.decode("utf-8", errors="replace")
    found = []
    p = Path(rel)
    head = text.split("\n", 2)[:2]
    needs_spdx = p.suffix in SPDX_EXT or p.name == "meson.build" or \
        (not p.suffix and head and head[0].startswith("#!"))
    if needs_spdx and not any(SPDX in h for h in head):
        found.append((rel, 1, "spdx", f"no {SPDX} line in the first two lines"))
    skip_dates = dated(rel)
    man = re.fullmatch(r"\.[0-9]", p.suffix or "") is not None
    for no, seg, literal in prose(p, text):
        if man and seg.startswith(".TH"):
            continue
        seg = UUID.sub(" ", seg)
        for rule, rx in RULES:
            if skip_dates and rule in DATED:
                continue
            for m in rx.finditer(seg):
                if rule == "commit-hash" and not is_hash(m.group(0)):
                    continue
                if rule == "session-tag" and literal and seg.strip() == m.group(0):
                    continue                     # a name (a port, a dict key): data
                found.append((rel, no, rule, m.group(0)))
    return found


def tracked(root):
    r = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.decode(errors="replace").strip() or "git ls-files failed")
    return [f for f in r.stdout.decode().split("\0") if f]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="lint.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                    help="git work tree to check (default: this script's)")
    ap.add_argument("paths", nargs="*", metavar="PATH",
                    help="files to check, relative to the root (default: git ls-files)")
    a = ap.parse_args(argv)
    root = a.root.resolve()
    try:
        files = a.paths or tracked(root)
    except (OSError, RuntimeError) as e:
        print(f"lint: {root}: {e}", file=sys.stderr)
        return 2
    findings = []
    for rel in files:
        findings += check_file(root, rel)
    for rel, no, rule, what in findings:
        print(f"{rel}:{no}: {rule}: {what}")
    if findings:
        print(f"lint: {len(findings)} finding(s) in {len({f[0] for f in findings})} file(s)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
