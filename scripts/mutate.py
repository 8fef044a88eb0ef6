#!/usr/bin/env python3
"""Mutation harness: plant the bugs of a plant list one at a time in a
scratch git worktree and run the fast test suites against each.

See docs/mutation/README.md for the plant list format and how to run it.
Run through scripts/mutate.sh; `scripts/mutate.sh -h` lists the flags.

For each plant the harness checks that its original text occurs exactly
once in the file at the chosen commit (it refuses the whole list
otherwise), writes the replacement, runs the test groups in order (the
plant's own `first:` packages, then the default groups) and stops at the
first group that fails, restores the file, and records a verdict:

  caught   a test failed, and failed again when re-run alone (a test that
           passes when re-run is flaky: the harness runs the group again
           without it, then the next groups, and names it): the package
           and the first failing test
  timeout  a test binary ran past -timeout, or a group past the wall-clock
           limit (a hang): the package and the test that was running
  build    the plant does not compile (an invalid plant: fix it)
  missed   every group passed

Only one `go test` process tree runs at a time.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# The modules of the repository, by directory (longest prefix wins).
MODULES = ["kube", "bench", "."]

# The fast suites, in the order they run after a plant's own packages:
# (module directory, packages). Each entry is one `go test` invocation, so
# the packages of a group compile and run in parallel.
DEFAULT_GROUPS = [
    (".", ["."]),
    (".", ["./actor", "./shard"]),
    (".", ["./snapshot", "./nodeinfo", "./nodetree", "./internal/..."]),
    (".", ["./tests/..."]),
    ("kube", ["./..."]),
]

MARK = "@@ "


class PlantError(Exception):
    pass


class Plant:
    def __init__(self, pid, area, line):
        self.id = pid
        self.area = area
        self.line = line  # line number of its header in the list
        self.desc = ""
        self.file = ""
        self.first = []  # packages relative to the repository root
        self.note = ""
        self.original = None
        self.replacement = None


def parse_plants(path):
    """Parses the plant list (format: docs/mutation/README.md)."""
    plants, cur, block, buf = [], None, None, []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, raw in enumerate(lines, 1):
        if block is not None:
            if raw.startswith(MARK):
                text = "\n".join(buf)
                if block == "original":
                    cur.original = text
                else:
                    cur.replacement = text
                buf = []
                block = None
                tag = raw[len(MARK):].strip()
                if tag in ("original", "replacement"):
                    block = tag
                elif tag != "end":
                    raise PlantError(f"{path}:{n}: unknown marker {raw!r}")
                continue
            buf.append(raw)
            continue
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("== "):
            parts = line[3:].split()
            if len(parts) != 2:
                raise PlantError(f"{path}:{n}: want '== <id> <area>', got {raw!r}")
            cur = Plant(parts[0], parts[1], n)
            plants.append(cur)
            continue
        if cur is None:
            raise PlantError(f"{path}:{n}: text before the first plant: {raw!r}")
        if raw.startswith(MARK):
            tag = raw[len(MARK):].strip()
            if tag not in ("original", "replacement"):
                raise PlantError(f"{path}:{n}: unexpected marker {raw!r}")
            block, buf = tag, []
            continue
        key, sep, val = line.partition(":")
        if not sep:
            raise PlantError(f"{path}:{n}: want 'key: value', got {raw!r}")
        key, val = key.strip(), val.strip()
        if key == "desc":
            cur.desc = val
        elif key == "file":
            cur.file = val
        elif key == "first":
            cur.first = val.split()
        elif key == "note":
            cur.note = val
        else:
            raise PlantError(f"{path}:{n}: unknown key {key!r}")
    if block is not None:
        raise PlantError(f"{path}: unterminated {block} block (missing '@@ end')")
    seen = set()
    for p in plants:
        where = f"{path}:{p.line}: plant {p.id}"
        if p.id in seen:
            raise PlantError(f"{where}: duplicate id")
        seen.add(p.id)
        if not p.desc or not p.file:
            raise PlantError(f"{where}: desc and file are required")
        if p.original is None or p.replacement is None:
            raise PlantError(f"{where}: needs an original and a replacement block")
        if not p.original.strip():
            raise PlantError(f"{where}: empty original")
        if p.original == p.replacement:
            raise PlantError(f"{where}: the replacement equals the original")
    return plants


def sh(args, cwd=None, check=True):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout


def module_of(path):
    """Returns (module dir, path inside it) for a repository-relative path."""
    p = os.path.normpath(path)
    for m in MODULES:
        if m == ".":
            return ".", p
        if p == m or p.startswith(m + "/"):
            return m, os.path.relpath(p, m)
    return ".", p


def pkg_arg(rel):
    rel = os.path.normpath(rel)
    return "." if rel == "." else "./" + rel


def check_plants(repo, commit, plants):
    """Refuses plants whose original does not occur exactly once at commit."""
    bad = []
    cache = {}
    for p in plants:
        if p.file not in cache:
            r = subprocess.run(["git", "show", f"{commit}:{p.file}"], cwd=repo, capture_output=True, text=True)
            cache[p.file] = r.stdout if r.returncode == 0 else None
        text = cache[p.file]
        if text is None:
            bad.append(f"{p.id}: {p.file} does not exist at {commit[:12]}")
            continue
        n = text.count(p.original)
        if n != 1:
            bad.append(f"{p.id}: the original occurs {n} times in {p.file} (want exactly 1)")
    return bad


def groups_for(plant):
    """The plant's own packages first (one group per module), then the
    default groups without those packages."""
    first = {}
    for f in plant.first:
        mod, rel = module_of(f.rstrip("/"))
        if f.endswith("/..."):
            mod, rel = module_of(f[: -len("/...")])
            arg = pkg_arg(rel) + "/..." if rel != "." else "./..."
        else:
            arg = pkg_arg(rel)
        first.setdefault(mod, []).append(arg)
    out = [(mod, pkgs, True) for mod, pkgs in first.items()]
    for mod, pkgs in DEFAULT_GROUPS:
        rest = [p for p in pkgs if p not in first.get(mod, [])]
        if rest:
            out.append((mod, rest, False))
    return out


class GroupResult:
    def __init__(self):
        self.status = "pass"  # pass, fail, build, timeout
        self.pkg = ""
        self.test = ""
        self.detail = ""
        self.failed_pkgs = []


TIMED_OUT = re.compile(r"panic: test timed out after")


def run_group(wt, mod, pkgs, args, log, extra=()):
    """Runs one go test invocation and classifies its outcome."""
    cmd = ["go", "test", "-short", "-count=1", f"-timeout={args.timeout}", "-failfast", "-json", *extra]
    if args.run and "-run" not in extra:
        cmd += ["-run", args.run]
    if args.race:
        cmd.append("-race")
    if not args.vet:
        cmd.append("-vet=off")
    cmd += pkgs
    cwd = os.path.join(wt, mod)
    log.write(f"\n$ (cd {mod} && {' '.join(cmd)})\n")
    log.flush()
    res = GroupResult()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=args.group_timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        res.status = "timeout"
        res.detail = f"group ran past {args.group_timeout}s (wall clock): killed"
    log.write(out)
    first_fail = None  # (pkg, test)
    build = []
    timeouts = {}  # pkg -> running test
    pkg_fail = []
    lines_by_pkg = {}
    for line in out.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            if "[build failed]" in line or "[setup failed]" in line:
                build.append(line.strip())
            continue
        if not isinstance(ev, dict):
            continue
        action = ev.get("Action")
        pkg = ev.get("Package") or ev.get("ImportPath") or ""
        test = ev.get("Test") or ""
        output = ev.get("Output") or ""
        if action == "build-fail":
            build.append(pkg)
        if action == "output" and output:
            if TIMED_OUT.search(output):
                timeouts.setdefault(pkg, "")
            if pkg in timeouts:
                lines_by_pkg.setdefault(pkg, []).append(output)
        if action == "fail":
            if ev.get("FailedBuild"):
                build.append(pkg)
            elif test and first_fail is None:
                first_fail = (pkg, test)
            elif not test:
                pkg_fail.append(pkg)
    for pkg in timeouts:
        # The panic lists the tests that were running: "running tests:\n\tTestX (1m30s)".
        text = "".join(lines_by_pkg.get(pkg, []))
        m = re.search(r"running tests:\s*\n\s*(\S+)", text)
        timeouts[pkg] = m.group(1) if m else ""
    res.failed_pkgs = pkg_fail
    if res.status == "timeout":
        return res
    if build:
        res.status, res.pkg, res.detail = "build", build[0], "does not compile"
    elif timeouts:
        pkg = next(iter(timeouts))
        res.status, res.pkg, res.test = "timeout", pkg, timeouts[pkg]
        res.detail = f"test binary ran past -timeout={args.timeout}"
    elif first_fail is not None:
        res.status, (res.pkg, res.test) = "fail", first_fail
    elif pkg_fail or proc.returncode != 0:
        res.status = "fail"
        res.pkg = pkg_fail[0] if pkg_fail else ""
        res.detail = "package failed outside a test (TestMain, panic in init, goleak)" if pkg_fail else \
            f"go test exited {proc.returncode}"
    return res


def confirmed(wt, mod, r, args, log):
    """Re-runs the first failing test (with the plant in place) and reports
    whether it fails again: a test that fails once and then passes is
    flaky, and its failure does not count as a catch."""
    pattern = "/".join("^" + re.escape(part) + "$" for part in r.test.split("/"))
    log.write(f"\n# confirming {r.pkg} {r.test}\n")
    again = run_group(wt, mod, [r.pkg], args, log, extra=["-run", pattern])
    return again.status != "pass"


# A group is re-run at most this many times for tests that failed once and
# passed when re-run alone.
MAX_FLAKY = 3


def run_group_skipping_flaky(wt, mod, pkgs, args, log, flaky):
    """Runs a group; a failing test that passes when re-run alone (flaky, or
    failing only sometimes with the plant) is not a catch: with -failfast
    it kept the package's later tests from running, so the group is run
    again without it (-skip), up to MAX_FLAKY times. Such tests are
    appended to flaky."""
    skip = []
    while True:
        extra = ["-skip", "|".join(skip)] if skip else []
        r = run_group(wt, mod, pkgs, args, log, extra=extra)
        if r.status != "fail" or not r.test or confirmed(wt, mod, r, args, log):
            return r
        flaky.append(short_pkg(r.pkg) + " " + r.test)
        skip.append("^" + re.escape(r.test.split("/")[0]) + "$")
        if len(skip) > MAX_FLAKY:
            return GroupResult()  # counted as passing: the flaky tests are named


def short_pkg(pkg):
    pkg = pkg.split(" [")[0]  # a build failure names the test variant: "pkg [pkg.test]"
    for prefix in ("github.com/schedcache/schedcache/",):
        if pkg.startswith(prefix):
            return pkg[len(prefix):]
    if pkg == "github.com/schedcache/schedcache":
        return "(root)"
    return pkg


def make_worktree(repo, commit, wt):
    if os.path.exists(wt):
        subprocess.run(["git", "worktree", "remove", "--force", wt], cwd=repo, capture_output=True)
        if os.path.exists(wt):
            shutil.rmtree(wt)
    subprocess.run(["git", "worktree", "prune"], cwd=repo, capture_output=True)
    sh(["git", "worktree", "add", "--detach", wt, commit], cwd=repo)


def worktree_status(wt):
    return sh(["git", "status", "--porcelain", "--untracked-files=no"], cwd=wt)


def run_plant(wt, plant, args, logdir, clean):
    path = os.path.join(wt, plant.file)
    with open(path, encoding="utf-8") as f:
        orig = f.read()
    if orig.count(plant.original) != 1:
        raise SystemExit(f"{plant.id}: the original does not occur exactly once in {plant.file}")
    t0 = time.time()
    verdict, catcher, detail = "missed", "", ""
    with open(os.path.join(logdir, plant.id + ".log"), "w", encoding="utf-8") as log:
        log.write(f"plant {plant.id}: {plant.desc}\nfile {plant.file}\n")
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(orig.replace(plant.original, plant.replacement, 1))
            flaky = []
            for mod, pkgs, _ in groups_for(plant):
                r = run_group_skipping_flaky(wt, mod, pkgs, args, log, flaky)
                if r.status == "pass":
                    continue
                verdict = {"fail": "caught", "build": "build", "timeout": "timeout"}[r.status]
                catcher = short_pkg(r.pkg)
                if r.test:
                    catcher += " " + r.test
                detail = r.detail
                break
            if flaky:
                detail = "; ".join(filter(None, [detail, "failed once, passed when re-run (flaky): " + ", ".join(flaky)]))
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(orig)
    status = worktree_status(wt)
    if status != clean:
        raise SystemExit(f"{plant.id}: the worktree is not as it was after restoring: {status}")
    return verdict, catcher, detail, time.time() - t0


def md_escape(s):
    return s.replace("|", "\\|")


def main():
    ap = argparse.ArgumentParser(prog="scripts/mutate.sh", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plants", default="docs/mutation/plants.txt", help="plant list (default %(default)s)")
    ap.add_argument("--commit", default="HEAD", help="commit to plant into (default HEAD)")
    ap.add_argument("--ids", default="", help="comma-separated plant ids to run (default: all)")
    ap.add_argument("--area", default="", help="run only the plants of this area")
    ap.add_argument("--race", action="store_true", help="run the tests with -race")
    ap.add_argument("--run", default="", metavar="REGEX",
                    help="go test -run REGEX in every group: does this test catch the plants? (default: every test)")
    ap.add_argument("--vet", action="store_true", help="keep go test's vet checks (default -vet=off)")
    ap.add_argument("--timeout", default="90s", help="go test -timeout per test binary (default %(default)s)")
    ap.add_argument("--group-timeout", type=int, default=600,
                    help="wall-clock seconds per go test invocation before it is killed (default %(default)s)")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "schedcache-mutate"),
                    help="scratch worktree (recreated; a fixed path keeps the build cache warm; default %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch worktree afterwards")
    ap.add_argument("--with", dest="with_files", action="append", default=[], metavar="PATH",
                    help="copy PATH (relative to the repository root) from your working tree into the scratch "
                         "worktree first: try a new, uncommitted test against the plants (repeatable)")
    ap.add_argument("--out", default="", help="write the markdown results table here")
    ap.add_argument("--baseline", action="store_true", help="first run every group without a plant; stop if one fails")
    ap.add_argument("--check", action="store_true", help="only check the plant list against the commit")
    ap.add_argument("--list", action="store_true", help="list the plants and exit")
    args = ap.parse_args()

    repo = sh(["git", "rev-parse", "--show-toplevel"], cwd=os.path.dirname(os.path.abspath(__file__))).strip()
    plants_path = args.plants if os.path.isabs(args.plants) else os.path.join(repo, args.plants)
    try:
        plants = parse_plants(plants_path)
    except PlantError as e:
        raise SystemExit(str(e))
    if args.ids:
        want = [i.strip() for i in args.ids.split(",") if i.strip()]
        known = {p.id for p in plants}
        unknown = [i for i in want if i not in known]
        if unknown:
            raise SystemExit(f"unknown plant ids: {', '.join(unknown)}")
        plants = [p for p in plants if p.id in want]
    if args.area:
        plants = [p for p in plants if p.area == args.area]
    if args.list:
        for p in plants:
            print(f"{p.id:6} {p.area:10} {p.file}: {p.desc}")
        return
    commit = sh(["git", "rev-parse", args.commit + "^{commit}"], cwd=repo).strip()
    bad = check_plants(repo, commit, plants)
    if bad:
        print("refused, the plant list does not apply to " + commit[:12] + ":", file=sys.stderr)
        for b in bad:
            print("  " + b, file=sys.stderr)
        raise SystemExit(2)
    if args.check:
        print(f"{len(plants)} plants apply to {commit[:12]}")
        return

    wt = os.path.abspath(args.workdir)
    make_worktree(repo, commit, wt)
    for f in args.with_files:
        dst = os.path.join(wt, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.join(repo, f), dst)
    clean = worktree_status(wt)  # the --with files may change tracked ones
    logdir = os.path.join(wt, ".mutate-logs")
    os.makedirs(logdir, exist_ok=True)
    goversion = sh(["go", "version"]).strip()
    print(f"commit {commit}{' with ' + ' '.join(args.with_files) + ' from the working tree' if args.with_files else ''}"
          f"\n{goversion}\nworktree {wt} (logs in {logdir})\n"
          f"go test -short -count=1 -timeout={args.timeout} -failfast{' -race' if args.race else ''}"
          f"{' -run ' + args.run if args.run else ''}"
          f"{'' if args.vet else ' -vet=off'}", flush=True)
    start = time.time()
    try:
        if args.baseline:
            with open(os.path.join(logdir, "baseline.log"), "w", encoding="utf-8") as log:
                for mod, pkgs in DEFAULT_GROUPS:
                    r = run_group(wt, mod, pkgs, args, log)
                    if r.status != "pass":
                        raise SystemExit(f"baseline fails without a plant ({r.status}: {short_pkg(r.pkg)} {r.test} "
                                         f"{r.detail}); see {log.name}")
            print(f"baseline: every group passes ({time.time() - start:.0f}s)", flush=True)
        rows = []
        for p in plants:
            verdict, catcher, detail, secs = run_plant(wt, p, args, logdir, clean)
            rows.append((p, verdict, catcher, detail, secs))
            print(f"{p.id:6} {verdict:8} {secs:5.0f}s  {catcher}{'  (' + detail + ')' if detail else ''}", flush=True)
    finally:
        if not args.keep:
            subprocess.run(["git", "worktree", "remove", "--force", wt], cwd=repo, capture_output=True)
    total = time.time() - start
    caught = sum(1 for r in rows if r[1] in ("caught", "timeout"))
    invalid = sum(1 for r in rows if r[1] == "build")
    lines = [
        f"Commit `{commit}`" + (f" with {', '.join(args.with_files)} from the working tree" if args.with_files else "")
        + f"; {goversion}; `go test -short -count=1 -timeout={args.timeout} -failfast"
        f"{' -race' if args.race else ''}{'' if args.vet else ' -vet=off'}`; {len(rows)} plants in {total:.0f}s.",
        "",
        f"Caught (a test failed or hung): {caught}/{len(rows) - invalid}"
        + (f"; {invalid} did not compile (invalid)" if invalid else "") + ".",
        "",
        "| id | area | description | verdict | catcher | s | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for p, verdict, catcher, detail, secs in rows:
        v = f"{verdict} ({detail})" if detail else verdict
        lines.append(f"| {p.id} | {p.area} | {md_escape(p.desc)} | {v} | {md_escape(catcher)} | {secs:.0f} | "
                     f"{md_escape(p.note)} |")
    table = "\n".join(lines) + "\n"
    print()
    print(table)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(table)


if __name__ == "__main__":
    main()
