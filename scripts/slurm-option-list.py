#!/usr/bin/env python3
"""Lists the options of Slurm 22.05's user commands, from its --help texts and manual pages.

Usage: scripts/slurm-option-list.py HELP_DIR > tests/data/slurm_options.txt

HELP_DIR holds CMD.txt (CMD --help) and man/CMD.1.txt (the manual page as plain text), as
captured in the shared reference material. The list is committed so that the option test
(cli_test SlurmOptionTable) runs on a clean clone; rerun this when the reference changes.
Output: one line per option, `COMMAND LONG SHORT VALUE`, with `-` where an option has no long
or short form, and VALUE one of none, required, optional.
"""
import os
import re
import sys

COMMANDS = ["sbatch", "srun", "salloc", "squeue", "sinfo", "scancel", "sacct", "scontrol",
            "sacctmgr", "sshare", "sprio", "sreport", "sdiag"]

# One spelling of an option at the start of a line: -x, --long, --long=V, --long[=V], -x V
SPELLING = re.compile(r"(--?[A-Za-z0-9][-A-Za-z0-9_]*)(\[?=|\s+<|\s*\[)?")


def options_in(line):
    """The spellings that open an option line (`-a, --array=indexes`, `-h or --help:`)."""
    found = []
    rest = line.strip()
    while rest.startswith("-") and not rest.startswith("---"):
        m = SPELLING.match(rest)
        if not m:
            break
        name, tail = m.group(1), m.group(2) or ""
        after = rest[m.end():]
        value = "none"
        if tail.startswith("["):
            value = "optional"
        elif tail.startswith("=") or tail.strip().startswith("<"):
            value = "required"
        found.append((name, value))
        rest = after.lstrip("]").lstrip()
        # `=<...>` or `=word`: skip the value text to reach a following `, --other`
        rest = re.sub(r"^[^,\s]*", "", rest) if value != "none" else rest
        rest = rest.lstrip()
        if rest.startswith(","):
            rest = rest[1:].lstrip()
        elif rest.startswith("or "):
            rest = rest[3:].lstrip()
        elif len(name) == 2 and value == "none" and rest.startswith("--"):
            pass  # `-B  --extra-node-info=...`: the short and long forms side by side
        else:
            break
    return found


def man_options(path):
    """Option lines of the OPTIONS section: indented by exactly seven spaces."""
    out = []
    in_options = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if re.match(r"^[A-Z][A-Z ]+$", line):
                in_options = line.strip() == "OPTIONS"
                continue
            if in_options and re.match(r"^ {7}-[-A-Za-z0-9]", line):
                out.append(options_in(line))
    return out


def help_options(path):
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if re.match(r"^\s{1,8}-[-A-Za-z0-9]", line):
                out.append(options_in(line))
    return out


def main():
    base = sys.argv[1]
    for cmd in COMMANDS:
        groups = []
        man = os.path.join(base, "man", cmd + ".1.txt")
        hlp = os.path.join(base, cmd + ".txt")
        if os.path.exists(man):
            groups += man_options(man)
        if os.path.exists(hlp):
            groups += help_options(hlp)
        merged = {}  # key: the long name (or the short one) -> [long, short, value]
        order = []
        for group in groups:
            longs = [n for n, _ in group if n.startswith("--")]
            shorts = [n for n, _ in group if not n.startswith("--") and len(n) == 2]
            if not longs and not shorts:
                continue
            value = "none"
            for _, v in group:
                if v != "none":
                    value = v
            short = shorts[0] if shorts else "-"
            for long in longs or ["-"]:
                key = long if long != "-" else short
                if key not in merged:
                    # a short flag already seen alone joins its long form
                    if short != "-" and short in merged and merged[short][0] == "-":
                        merged[key] = merged.pop(short)
                        order[order.index(short)] = key
                        merged[key][0] = long
                    else:
                        merged[key] = [long, short, value]
                        order.append(key)
                entry = merged[key]
                if entry[1] == "-" and short != "-":
                    entry[1] = short
                if entry[2] == "none" and value != "none":
                    entry[2] = value
        for key in order:
            long, short, value = merged[key]
            print(cmd, long, short, value)


if __name__ == "__main__":
    main()
