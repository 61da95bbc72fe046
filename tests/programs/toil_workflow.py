"""A tiny Toil workflow for tests/system/toil_stest.sh.

The root job has two children that each write a file naming their Slurm job; with --fail the
second child exits 3 instead; with --sleep the root has one child that writes its Slurm job id
to OUTDIR/sleeping and sleeps (for the test to cancel it)."""
import os
import sys
import time

from toil.common import Toil
from toil.job import Job


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text + "\n")
    os.rename(path + ".tmp", path)


def child(job, path, text, fail):
    if fail:
        sys.exit(3)  # on purpose
    write(path, text + " " + os.environ.get("SLURM_JOB_ID", "nojob"))


def sleeper(job, path):
    write(path, os.environ.get("SLURM_JOB_ID", "nojob"))
    time.sleep(600)


def root(job, outdir, fail, sleep):
    if sleep:
        job.addChildJobFn(sleeper, os.path.join(outdir, "sleeping"))
        return
    job.addChildJobFn(child, os.path.join(outdir, "a.txt"), "child a", False)
    job.addChildJobFn(child, os.path.join(outdir, "b.txt"), "child b", fail)


if __name__ == "__main__":
    parser = Job.Runner.getDefaultArgumentParser()
    parser.add_argument("--outdir", required=True)
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--sleep", action="store_true")
    options = parser.parse_args()
    with Toil(options) as toil:
        toil.start(Job.wrapJobFn(root, options.outdir, options.fail, options.sleep))
