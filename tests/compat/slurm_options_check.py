#!/usr/bin/env python3
"""Every option of Slurm 22.05's commands has a row in docs/slurm-compat.md, and the front end
answers it as its row says.

usage: slurm_options_check.py MUSTER DOC OPTIONS [--report]
  MUSTER   the muster binary (each front end is run through a link named as the Slurm command)
  DOC      docs/slurm-compat.md; its "## Every option" section has a table per command (### CMD)
           with the columns  option | answer | example | note
  OPTIONS  tests/data/slurm_options.txt (scripts/slurm-option-list.py made it from Slurm's own
           --help texts and manual pages): `COMMAND LONG SHORT VALUE` per line
  --report print each row's answer and what the front end said, and the totals

A row's answer is `yes` (implemented), `no effect` (accepted; it changes nothing a job gets
here) or `refused` (an error that names the option and says why). The check runs the front end
with the row's example (or the option alone when it takes no value) and no configuration file:
an option the front end takes gets as far as reading the configuration (or exits 0, as --help
does); a refused one stops before, with an error naming the option; an unknown one fails.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# What each front end needs besides the option to get as far as reading the configuration.
TRAILING = {
    "sbatch": ["--wrap=true"],
    "srun": ["true"],
    "salloc": ["true"],
    "scancel": ["1"],
    "scontrol": ["show", "config"],
    "sacctmgr": ["show", "account"],
    "sreport": ["cluster", "AccountUtilizationByUser"],
}
ANSWERS = ("yes", "no effect", "refused")
SPELLING = re.compile(r"(?<![-\w])(--?[A-Za-z0-9][-A-Za-z0-9_]*)")


def read_rows(doc):
    """{command: [(spellings, answer, example_args, line_number)]} from the Every option tables."""
    rows = {}
    section = None
    in_options = False
    with open(doc, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("## "):
                in_options = line.strip() == "## Every option"
                section = None
                continue
            if not in_options:
                continue
            if line.startswith("### "):
                section = line[4:].strip().strip("`")
                rows.setdefault(section, [])
                continue
            if section is None or not line.startswith("|") or line.startswith("|---"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] == "option":
                continue
            if len(cells) < 4:
                raise SystemExit(f"{doc}:{n}: a row needs option | answer | example | note")
            spellings = SPELLING.findall(cells[0])
            example = cells[2].strip("`").split() if cells[2] else []
            rows[section].append((spellings, cells[1], example, n))
    return rows


def run(link, args, env, cwd):
    try:
        p = subprocess.run([link] + args, env=env, cwd=cwd, capture_output=True, text=True,
                           timeout=20, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "timeout", ""
    said = (p.stderr + p.stdout).strip()
    if p.returncode == 0 or "cannot read config file" in said:
        return "taken", said
    low = said.lower()
    if "unknown" in low or "unrecognized" in low or "invalid option" in low:
        return "unknown", said
    return "refused", said


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    muster, doc, options = sys.argv[1:4]
    report = "--report" in sys.argv[4:]
    rows = read_rows(doc)
    work = tempfile.mkdtemp(prefix="muster-options.")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_",
                                                                      "SALLOC_", "SRUN_",
                                                                      "SQUEUE_", "SINFO_",
                                                                      "SACCT_", "MUSTER_"))}
    env["MUSTER_CONF"] = os.path.join(work, "no-such", "muster.toml")
    failures = []
    totals = {}
    try:
        for cmd in sorted({line.split()[0] for line in open(options) if line.strip()}):
            os.symlink(os.path.abspath(muster), os.path.join(work, cmd))
        for line in open(options):
            if not line.strip():
                continue
            cmd, long, short, value = line.split()
            names = [s for s in (long, short) if s != "-"]
            found = [r for r in rows.get(cmd, []) if any(s in r[0] for s in names)]
            if not found:
                failures.append(f"{cmd} {' '.join(names)}: no row in {doc} (## Every option, ### {cmd})")
                continue
            spellings, answer, example, n = found[0]
            if answer not in ANSWERS:
                failures.append(f"{doc}:{n}: answer '{answer}' is none of {', '.join(ANSWERS)}")
                continue
            totals[(cmd, answer)] = totals.get((cmd, answer), 0) + 1
            if not example:
                if value == "required":
                    failures.append(f"{doc}:{n}: {names[0]} takes a value: give an example")
                    continue
                example = [names[0]]
            said_kind, said = run(os.path.join(work, cmd), example + TRAILING.get(cmd, []), env,
                                  work)
            want = "refused" if answer == "refused" else "taken"
            first = said.splitlines()[0] if said else ""
            if report:
                print(f"{cmd:9} {names[0]:24} {answer:9} -> {said_kind:8} {first[:110]}")
            if said_kind != want:
                failures.append(f"{doc}:{n}: {cmd} {' '.join(example)}: the row says {answer}, "
                                f"the front end {said_kind}: {first}")
            elif want == "refused" and not any(s in said for s in names + spellings):
                failures.append(f"{doc}:{n}: {cmd} {' '.join(example)}: refused without naming "
                                f"the option: {first}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = sum(totals.values())
    taken = sum(v for (c, a), v in totals.items() if a != "refused")
    for cmd in sorted({c for c, _ in totals}):
        counts = ", ".join(f"{totals.get((cmd, a), 0)} {a}" for a in ANSWERS)
        print(f"{cmd}: {counts}")
    if total:
        print(f"all: {taken} of {total} options implemented or accepted ({100 * taken // total}%)")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
