#!/usr/bin/env python3
"""Checks the command lines of the README and docs against the code: every
`burstpool SUBCOMMAND --flag` must be a flag of that subcommand (its --help),
every `--set section.key=...` a key `burstpool keys` lists, every
`--flag` given to a repository script must appear in that script, and every
repository file a command reads (.ini, .py, .sh, .sbatch, .md) must exist.

Command lines are those of fenced or indented code blocks. Placeholders in
capitals (JOB.ini, PLAN.json), shell variables and optional parts in
[brackets] are read as such: a placeholder path is not looked for, but its
flags are checked.

Usage: tests/docs_commands.py BURSTPOOL_BINARY SOURCE_DIR [FILE.md ...]
(default files: README.md, CHANGELOG.md, docs/*.md, perf/README.md,
slurm/README.md). Prints one line per problem, naming file and line; exit 1
when there is any.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

SUBCOMMANDS = ("train", "plan", "profile", "convert", "simulate", "fit-packing", "keys")
SCRIPTS = re.compile(r"^(?:\./)?(scripts|perf|slurm|tests)/[\w./-]+\.(py|sh|sbatch)$")
INPUTS = re.compile(r"^(?:\./)?(jobs|docs|scripts|perf|slurm|tests)/[\w./-]+\.(ini|py|sh|sbatch|md)$")
TRAIN_SCRIPTS = ("slurm/train.sbatch", "slurm/sweep.sbatch")


def code_lines(path):
    """(line number, text) of every command line in code blocks, continuations joined."""
    lines, fenced, previous_blank, out = open(path).read().split("\n"), False, True, []
    pending, start = "", 0
    for number, line in enumerate(lines, 1):
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        indented = line.startswith("    ") and (previous_blank or out and out[-1][0] == number - 1 or pending)
        previous_blank = not line.strip()
        if not (fenced or indented) or not line.strip():
            continue
        text = line.strip()
        if not pending:
            start = number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        out.append((start, pending + text))
        pending = ""
    return out


def words(text):
    """The shell words of a line, without its comment and the [optional] brackets."""
    text = re.sub(r"(^|\s)#.*$", "", text)
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    return [t.strip("[]") for t in tokens if t.strip("[]")]


def placeholder(token):
    return bool(re.search(r"[A-Z]{2,}|\$|[<>{}*]|\.\.\.", token))


class Checker:
    def __init__(self, binary, root):
        self.binary, self.root, self.problems = binary, root, []
        self.flags = {}
        for sub in SUBCOMMANDS + ("",):
            help_text = subprocess.run([binary] + ([sub] if sub else []) + ["--help"], capture_output=True,
                                       text=True).stdout
            self.flags[sub] = set(re.findall(r"--[a-z][a-z0-9-]*", help_text)) | {"--help"}
        keys = subprocess.run([binary, "keys"], capture_output=True, text=True).stdout
        self.keys = {f"{s}.{k}" for s, k in re.findall(r"^\| \[(\w+)\] \| `(\w+)`", keys, re.M)}

    def problem(self, where, message):
        self.problems.append(f"{where}: {message}")

    def check_flags(self, where, flags, allowed, what):
        for i, flag in enumerate(flags):
            name = flag.split("=")[0]
            if name.startswith("--") and not placeholder(name) and name not in allowed:
                self.problem(where, f"{what} has no flag {name}")
            if name == "--set" and i + 1 < len(flags) or name == "--set" and "=" in flag:
                value = flag.split("=", 1)[1] if "=" in flag else flags[i + 1]
                key = value.split("=")[0]
                if "." in key and not placeholder(key) and key not in self.keys:
                    self.problem(where, f"--set {key}: not a key `burstpool keys` lists")

    def check_line(self, where, text):
        tokens = words(text)
        for i, token in enumerate(tokens):
            base = os.path.basename(token)
            if base == "burstpool" and not token.endswith(".py"):
                rest = tokens[i + 1:]
                sub = rest[0] if rest and rest[0] in SUBCOMMANDS else ""
                args = self.until_end(rest[1:] if sub else rest)
                self.check_flags(where, args, self.flags[sub], f"burstpool {sub}".strip())
            elif SCRIPTS.match(token) and not placeholder(token):
                path = os.path.join(self.root, token)
                if not os.path.exists(path):
                    self.problem(where, f"{token} does not exist")
                    continue
                args = self.until_end(tokens[i + 1:])
                if token.lstrip("./") in TRAIN_SCRIPTS:  # their options after the job file go to burstpool train
                    self.check_flags(where, args[1:], self.flags["train"], f"{token} (burstpool train)")
                    continue
                source = open(path).read()
                for flag in args:
                    name = flag.split("=")[0]
                    if name.startswith("--") and not placeholder(name) and name not in source:
                        self.problem(where, f"{token} has no flag {name}")
            elif INPUTS.match(token) and not placeholder(token):
                if not os.path.exists(os.path.join(self.root, token)):
                    self.problem(where, f"{token} does not exist")

    @staticmethod
    def until_end(tokens):
        out = []
        for t in tokens:
            if t in ("|", ";", "&&", "||", ">", ">>", "2>&1") or t.startswith(">"):
                break
            out.append(t)
        return out


def main():
    binary, root = sys.argv[1], sys.argv[2]
    files = sys.argv[3:] or ([os.path.join(root, f) for f in ("README.md", "CHANGELOG.md", "perf/README.md",
                                                              "slurm/README.md")] +
                             sorted(glob.glob(os.path.join(root, "docs/*.md"))))
    checker = Checker(binary, root)
    lines = 0
    for path in files:
        for number, text in code_lines(path):
            lines += 1
            checker.check_line(f"{os.path.relpath(path, root)}:{number}", text)
    for p in checker.problems:
        print(p)
    print(f"docs_commands: {lines} command lines in {len(files)} files, {len(checker.problems)} problem(s)")
    sys.exit(1 if checker.problems else 0)


if __name__ == "__main__":
    main()
