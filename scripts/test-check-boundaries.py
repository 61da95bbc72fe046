#!/usr/bin/env python3
"""Plants each walk-around of the module rules in a copy of the tree and checks that
check-boundaries.py refuses it (and passes the copy as it is). A rule the checker stops
enforcing fails here.

usage: test-check-boundaries.py REPO_ROOT LINK_GRAPH
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOTS = ("src", "include", "cli", "daemons", "tests")
SOURCES = (".h", ".hpp", ".cc", ".cpp", ".c")


def copy_tree(root, dest):
    for top in ROOTS:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith(SOURCES):
                    src = os.path.join(d, f)
                    dst = os.path.join(dest, os.path.relpath(src, root))
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.copyfile(src, dst)
    os.makedirs(os.path.join(dest, "cmake"))
    shutil.copyfile(os.path.join(root, "cmake", "modules.json"),
                    os.path.join(dest, "cmake", "modules.json"))


def run(checker, tree, graph):
    r = subprocess.run([sys.executable, checker, tree, graph], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    root, graph = sys.argv[1], sys.argv[2]
    checker = os.path.join(root, "scripts", "check-boundaries.py")
    failures = []
    with tempfile.TemporaryDirectory(prefix="muster-boundaries-") as tree:
        copy_tree(root, tree)
        graph_copy = os.path.join(tree, "link_graph.txt")
        shutil.copyfile(graph, graph_copy)
        rc, out = run(checker, tree, graph_copy)
        if rc != 0:
            print(f"the unplanted copy fails:\n{out}")
            return 1

        def plant_line(path, line, expect, what):
            full = os.path.join(tree, path)
            with open(full) as f:
                before = f.read()
            with open(full, "w") as f:
                f.write(line + "\n" + before)
            rc, out = run(checker, tree, graph_copy)
            with open(full, "w") as f:
                f.write(before)
            if rc == 0 or expect not in out:
                failures.append(f"{what}: not refused ({rc}):\n{out}")

        core = "src/core/planner.cc"
        plant_line(core, '#include "../controller/engine_context.h"', "may not walk up",
                   "a relative include out of the core")
        plant_line("cli/muster/main.cc", '#include "../../src/agent/job_supervisor.h"',
                   "may not walk up", "a relative include from the CLI into the agent")
        plant_line("cli/muster/main.cc", "#include <job_supervisor.h>",
                   "a project header with <...>", "an agent header by <...>")
        plant_line("cli/muster/main.cc", "#include <agent/job_supervisor.h>",
                   "a project header with <...>", "an agent header by <dir/...>")
        for header in ("thread", "fstream", "chrono", "sys/socket.h", "iostream"):
            plant_line(core, f"#include <{header}>", "only the standard headers",
                       f"<{header}> in the pure core")
        plant_line(core, '#include "muster/store/state_store.h"',
                   "includes muster/store/state_store.h: module core may",
                   "the core including the store")
        plant_line(core, '#include "muster/common/procfs.h"', "only the project headers listed",
                   "the core reaching /proc through common")
        plant_line(core, "#include /* a comment */ <thread>", "cannot read",
                   "an include with a comment before the header")
        plant_line(core, "#define H <thread>\n#include H", "cannot read", "an include by macro")
        plant_line(core, "%:include <thread>", "cannot read", "the %: digraph")
        plant_line(core, '#include "/usr/include/stdio.h"', "an absolute path", "an absolute path")

        # A system header that shares a name with a private header is not a project header.
        full = os.path.join(tree, "src/agent/agent.cc")
        with open(full) as f:
            before = f.read()
        with open(full, "w") as f:
            f.write("#include <spawn.h>\n" + before)
        rc, out = run(checker, tree, graph_copy)
        with open(full, "w") as f:
            f.write(before)
        if rc != 0:
            failures.append(f"<spawn.h> (the system's) refused:\n{out}")

        # Sources of other extensions, and links into the tree.
        other = os.path.join(tree, "src", "core", "sneaky.cxx")
        with open(other, "w") as f:
            f.write("#include <thread>\n")
        rc, out = run(checker, tree, graph_copy)
        os.remove(other)
        if rc == 0 or "sneaky.cxx" not in out:
            failures.append(f"a .cxx source: not checked:\n{out}")
        os.symlink(os.path.join(tree, "src", "controller"), os.path.join(tree, "src", "core", "ctl"))
        rc, out = run(checker, tree, graph_copy)
        os.remove(os.path.join(tree, "src", "core", "ctl"))
        if rc == 0 or "is a link" not in out:
            failures.append(f"a symlinked directory in the core: not refused:\n{out}")
        plant_line("src/agent/agent.cc", '#include "engine_context.h"', "not next to it",
                   "the agent including a controller's private header")
        plant_line("src/core/planner.cc", "#include <grpcpp/grpcpp.h>", "may not use grpc",
                   "gRPC in the core")

        # A source file no module owns, and one that two own.
        stray = os.path.join(tree, "src", "policy", "fifo_policy.cc")
        os.makedirs(os.path.dirname(stray))
        with open(stray, "w") as f:
            f.write("int x;\n")
        rc, out = run(checker, tree, graph_copy)
        if rc == 0 or "src/policy/fifo_policy.cc belongs to no module" not in out:
            failures.append(f"an unowned source file: not refused:\n{out}")
        shutil.rmtree(os.path.dirname(stray))
        modules = os.path.join(tree, "cmake", "modules.json")
        with open(modules) as f:
            spec = f.read()
        with open(modules, "w") as f:
            f.write(spec.replace('"paths": ["tests/programs"]',
                                 '"paths": ["tests/programs", "tests/bench/scenario.h"]'))
        rc, out = run(checker, tree, graph_copy)
        if rc == 0 or "belongs to several modules" not in out:
            failures.append(f"a file two modules own: not refused:\n{out}")
        with open(modules, "w") as f:
            f.write(spec)

        # Links through generator expressions.
        with open(graph) as f:
            links = f.read()
        for line, expect, what in (
                ("muster_core\t$<BUILD_INTERFACE:muster_store>", "muster_core (core) links",
                 "the core linking the store inside $<BUILD_INTERFACE:...>"),
                ("muster_core\t$<LINK_ONLY:gRPC::grpc++>", "muster_core (core) links",
                 "the core linking gRPC inside $<LINK_ONLY:...>"),
                ("muster_client\t$<$<CONFIG:Release>:muster_rpc>", "muster_client (client) links",
                 "the client linking rpc under a condition"),
                ("muster_core\tmuster_store", "muster_core (core) links", "a plain link"),
                ("muster_core\t-lrocksdb", "muster_core (core) links", "a library by -l flag"),
                ("muster_core\t$<LINK_LIBRARY:WHOLE_ARCHIVE,muster_store>",
                 "muster_core (core) links", "a generator expression the check cannot read")):
            with open(graph_copy, "w") as f:
                f.write(links.rstrip("\n") + "\n" + line + "\n")
            rc, out = run(checker, tree, graph_copy)
            if rc == 0 or expect not in out:
                failures.append(f"{what}: not refused:\n{out}")
        with open(graph_copy, "w") as f:
            f.write(links)
    for f in failures:
        print(f)
    if failures:
        print(f"{len(failures)} planted walk-around(s) passed the module check", file=sys.stderr)
        return 1
    print("module boundaries: every planted walk-around refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
