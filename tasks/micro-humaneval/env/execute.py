"""Run a candidate program on test inputs: the runner the grader and the rollouts use.

Command line (the runner; one program per process):

    python3 -m micro_humaneval.execute ITEM.json      # or "-" to read the item from stdin

    ITEM.json = {"program": "def f(x):\\n    return x + 1\\n", "entry_point": "f", "calls": [[1], [2]]}

The runner never sees expected values. It executes the program in a fresh
namespace, then calls entry_point(*args) for each call, in order, each under a
time limit of CALL_TIMEOUT_S (1 s), catching every exception. The program's own
output goes to /dev/null. The runner's last act is to write exactly one line to
its original standard output:

    A2RL_OUTPUTS [{"ok": true, "value": 2}, {"ok": false, "error": "TypeError: ..."}]

one element per call, in order: {"ok": true, "value": <result as JSON>} or
{"ok": false, "error": "<ExceptionName>: <message>"}. Results become plain JSON:
tuples turn into lists; anything else that is not JSON (a set, an object, NaN...)
or is longer than MAX_VALUE_CHARS once encoded gives {"ok": false, "error":
"unserialisable: ..."}. A program that does not compile, or fails or runs out of
time while its top level runs, fails every call; after a call runs out of time the
later calls are not run and fail too. Exit status 0 once the line is written, 2
for a malformed item.

Whoever reads the line compares the values with the expected ones (`compare`),
outside the runner: a program can print a fake line or exit early, but it never
sees the expected values, so it can only pass by computing them. Readers take the
last line that starts with "A2RL_OUTPUTS " (`parse_outputs`); no valid line means
every call failed.

The runner is no sandbox. Before running the program it disables process
creation, signals and file deletion in `os`, `signal`, `subprocess`, `shutil` and
`ctypes` (a guard against accidents, as HumanEval's reliability_guard is), but
code can get around that. The grader runs each program in a sandbox without
network, with 256 MiB of memory and few processes; in your own sandbox,
`run_programs` / `run_tests` below add resource limits and a wall clock.

In Python:

    from micro_humaneval.execute import run_tests, run_programs
    run_tests(program, entry_point, item["tests"])   # -> fraction of tests passed, 0.0 to 1.0
    run_programs([{"program": ..., "entry_point": ..., "calls": [...]}, ...])  # -> outputs per program
"""

import json
import math
import os
import signal
import sys

_exit = os._exit  # kept before the guard disables os._exit

MARKER = "A2RL_OUTPUTS "
CALL_TIMEOUT_S = 1.0  # per call, and for executing the program's top level
MAX_VALUE_CHARS = 10_000  # longest accepted JSON encoding of one result
MAX_ERROR_CHARS = 200
TIMEOUT_S = 10.0  # wall clock for one program in run_programs / run_tests (the grader's sandbox allows 10 s)
MEMORY_BYTES = 512 << 20  # address space of one program in run_programs
FILE_BYTES = 1 << 20  # largest file a program may write in run_programs


# ---- comparing outputs with expected values (outside the runner) ---------------------------


def json_equal(a, b):
    """Equality of JSON values: same JSON type and value; numbers by value (2 == 2.0), but a
    boolean is never a number (True != 1); arrays element by element; objects key by key."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is bool and type(b) is bool and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and isinstance(a, (str, type(None))) and a == b


def compare(outputs, expected):
    """How many calls passed: outputs[i] is {"ok": true, "value": v} with v JSON-equal to expected[i].

    outputs is the runner's list (see parse_outputs); anything else (None, a list of
    the wrong length) passes nothing.
    """
    if not isinstance(outputs, list) or len(outputs) != len(expected):
        return 0
    return sum(
        1
        for out, want in zip(outputs, expected)
        if isinstance(out, dict) and out.get("ok") is True and "value" in out and json_equal(out["value"], want)
    )


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def parse_outputs(stdout_text, n_calls):
    """The runner's outputs from its standard output, or None when there is no valid line.

    Takes the last line starting with MARKER; it must hold a JSON list of n_calls objects.
    """
    for line in reversed(stdout_text.splitlines()):
        if line.startswith(MARKER):
            try:
                outputs = json.loads(line[len(MARKER) :], parse_constant=_reject_constant)
            except ValueError:
                return None
            if isinstance(outputs, list) and len(outputs) == n_calls and all(isinstance(o, dict) for o in outputs):
                return outputs
            return None
    return None


def _no_output(n_calls, reason):
    return [{"ok": False, "error": f"NoOutput: the runner wrote no result ({reason})"} for _ in range(n_calls)]


# ---- running many programs: a fork server in a separate process ----------------------------
#
# Starting a Python interpreter per program costs 50-100 ms; forking one that has
# already imported this module costs about 2 ms. So run_programs starts one helper
# process (`python3 -m micro_humaneval.execute --serve`, no torch in it, single-threaded,
# so forking is safe) that forks a child per program. Each child gets its own session
# (process group), resource limits, an empty working directory and only its result
# file among the inherited file descriptors, then runs the same runner code as the
# command line; the helper kills the child's whole process group when it is done or
# out of time and passes the validated outputs back.


def run_programs(jobs, timeout_s=TIMEOUT_S, workers=2):
    """Run many programs, up to `workers` at a time; returns each job's outputs, in order.

    jobs: a list of {"program": str, "entry_point": str, "calls": [[args...], ...]}.
    Each program runs in its own process with MEMORY_BYTES of address space, about
    timeout_s seconds of CPU time, files of at most FILE_BYTES and an empty working
    directory, and is killed with every process it started after timeout_s seconds
    of wall clock. A program that ends without a valid result line fails every call.
    Identical jobs are run once.
    """
    if not jobs:
        return []
    # Identical jobs run once (sampled groups often repeat a completion) and share the outputs.
    unique, slot = {}, []
    for job in jobs:
        key = json.dumps([job["program"], job["entry_point"], job["calls"]])
        slot.append(unique.setdefault(key, len(unique)))
    distinct = [None] * len(unique)
    for job, k in zip(jobs, slot):
        distinct[k] = job
    outputs = _run_distinct(distinct, timeout_s, workers)
    return [[dict(o) for o in outputs[k]] for k in slot]


def _run_distinct(jobs, timeout_s, workers):
    import subprocess
    import tempfile

    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # where this package is
        "PYTHONHASHSEED": "0",  # set iteration order shows in some outputs: keep it fixed
        "LC_ALL": "C.UTF-8",
    }
    results = [None] * len(jobs)
    with tempfile.TemporaryFile() as job_file:
        for i, job in enumerate(jobs):
            line = {"i": i, "program": job["program"], "entry_point": job["entry_point"], "calls": job["calls"]}
            job_file.write((json.dumps(line) + "\n").encode())
        job_file.seek(0)
        # The helper enforces each program's deadline; this one only catches a stuck helper.
        overall = 30 + (timeout_s + 1) * math.ceil(len(jobs) / max(1, workers))
        argv = [sys.executable, "-m", "micro_humaneval.execute", "--serve", str(max(1, workers)), str(timeout_s)]
        try:
            proc = subprocess.run(argv, stdin=job_file, capture_output=True, env=env, timeout=overall)
            stdout, stderr = proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as e:
            stdout, stderr = e.stdout or b"", b"the helper process timed out"
    for line in stdout.decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
            results[record["i"]] = record["outputs"]
        except (ValueError, KeyError, IndexError, TypeError):
            pass
    reason = f"helper process failed: {stderr.decode('utf-8', errors='replace').strip()[-300:]}"
    return [r if r is not None else _no_output(len(job["calls"]), reason) for r, job in zip(results, jobs)]


def run_program(program, entry_point, calls, timeout_s=TIMEOUT_S):
    """The runner's outputs for one program (see run_programs)."""
    return run_programs([{"program": program, "entry_point": entry_point, "calls": calls}], timeout_s, 1)[0]


def run_tests(program, entry_point, tests, timeout_s=TIMEOUT_S):
    """Fraction of tests passed (0.0 to 1.0): tests is an item's list of {"args", "expected"}."""
    if not tests:
        return 0.0
    outputs = run_program(program, entry_point, [t["args"] for t in tests], timeout_s)
    return compare(outputs, [t["expected"] for t in tests]) / len(tests)


def _serve(workers, timeout_s):
    """The helper of run_programs: jobs as JSON lines on stdin, {"i", "outputs"} lines on stdout."""
    import resource
    import shutil
    import tempfile
    import time

    cpu_seconds = max(1, math.ceil(timeout_s))
    max_fd = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if max_fd == resource.RLIM_INFINITY or max_fd > 1 << 20:
        max_fd = 1 << 20
    running = {}  # pid -> (job, result fd, deadline, work directory)
    jobs = iter(sys.stdin)
    more = True
    scratch = tempfile.mkdtemp(prefix="micro-humaneval-")
    try:
        while more or running:
            while more and len(running) < workers:
                line = next(jobs, None)
                if line is None:
                    more = False
                    break
                job = json.loads(line)
                workdir = tempfile.mkdtemp(dir=scratch)
                result_fd, path = tempfile.mkstemp(dir=scratch)
                os.unlink(path)
                sys.stdout.flush()  # nothing buffered may be written twice by the child
                pid = os.fork()
                if pid == 0:  # the child: never returns
                    try:
                        os.setsid()
                        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
                        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
                        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))
                        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                        os.chdir(workdir)
                        # Only the result file stays open: not the helper's stdin/stdout, nor other jobs' files.
                        os.closerange(3, result_fd)
                        os.closerange(result_fd + 1, max_fd)
                        _run(job, result_fd)
                    finally:
                        _exit(70)  # never back into this loop; os._exit itself is disabled by now
                running[pid] = (job, result_fd, time.monotonic() + timeout_s, workdir)
            finished = False
            for pid, (job, result_fd, deadline, workdir) in list(running.items()):
                done, status = os.waitpid(pid, os.WNOHANG)
                if not done and time.monotonic() < deadline:
                    continue
                try:
                    os.killpg(pid, signal.SIGKILL)  # whatever it started goes too
                except (ProcessLookupError, PermissionError):
                    pass
                if not done:
                    os.waitpid(pid, 0)
                os.lseek(result_fd, 0, os.SEEK_SET)
                text = os.read(result_fd, 4 * FILE_BYTES).decode("utf-8", errors="replace")
                os.close(result_fd)
                shutil.rmtree(workdir, ignore_errors=True)
                outputs = parse_outputs(text, len(job["calls"]))
                if outputs is None:
                    why = "killed after the wall-clock limit" if not done else _describe(status)
                    outputs = _no_output(len(job["calls"]), why)
                sys.stdout.write(json.dumps({"i": job["i"], "outputs": outputs}) + "\n")
                del running[pid]
                finished = True
            if running and not finished:
                time.sleep(0.001)
    finally:
        sys.stdout.flush()
        shutil.rmtree(scratch, ignore_errors=True)


def _describe(status):
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"


# ---- the runner itself ---------------------------------------------------------------------


class _Timeout(BaseException):
    """Raised by the timer in the program's code; a BaseException so `except Exception` lets it through."""


class _Unserialisable(Exception):
    pass


def _to_json(value, budget):
    """value as plain JSON data (tuples become lists); _Unserialisable for anything else.

    budget is a one-element list counting down the elements and characters still
    allowed, so that a huge result is refused before it is encoded. Exact types only:
    a subclass could run code of its own while being converted.
    """
    budget[0] -= 1 + (len(value) if type(value) is str else 0)
    if budget[0] < 0:
        raise _Unserialisable(f"longer than {MAX_VALUE_CHARS} characters as JSON")
    t = type(value)
    if value is None or t in (bool, int, str):
        return value
    if t is float:
        if not math.isfinite(value):
            raise _Unserialisable("a NaN or infinite float")
        return value
    if t in (list, tuple):
        return [_to_json(v, budget) for v in value]
    if t is dict and all(type(k) is str for k in value):
        return {k: _to_json(v, budget) for k, v in value.items()}
    raise _Unserialisable(f"a {t.__name__}")


_PLAIN = (str, int, float, bool, type(None))


def _error(exc):
    """{"ok": false, "error": "<ExceptionName>: <message>"}, without running the program's code:
    the message only for built-in exceptions whose arguments are plain values (no timer runs now)."""
    if isinstance(exc, _Timeout):
        return {"ok": False, "error": f"TimeoutError: the call took longer than {CALL_TIMEOUT_S:g} s"}
    cls = type(exc)
    name = cls.__name__ if type(cls) is type else "Exception"
    text = name
    plain = all(type(a) in _PLAIN or (type(a) is tuple and all(type(b) in _PLAIN for b in a)) for a in exc.args)
    if cls.__module__ == "builtins" and plain:
        try:
            text = f"{name}: {exc}"
        except Exception:  # noqa: BLE001 - keep the name
            pass
    return {"ok": False, "error": text[:MAX_ERROR_CHARS]}


# Set to None before the program runs: a guard against accidents, not a sandbox. The
# runner keeps its own references to what it needs (os.write, os._exit, signal.setitimer).
_GUARDED = {
    "os": ["kill", "killpg", "system", "popen", "fork", "forkpty", "_exit", "abort", "putenv", "unsetenv", "remove",
           "removedirs", "rmdir", "unlink", "rename", "renames", "replace", "truncate", "ftruncate", "chmod",
           "fchmod", "lchmod", "chown", "fchown", "lchown", "chroot", "chdir", "fchdir", "setuid", "setgid",
           "posix_spawn", "posix_spawnp", "execv", "execve", "execl", "execle", "execlp", "execlpe", "execvp",
           "execvpe", "spawnv", "spawnve", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnvp", "spawnvpe"],
    "signal": ["signal", "alarm", "setitimer", "pthread_kill", "pthread_sigmask", "sigwait"],
}
# Importing these fails from then on: subprocess and multiprocessing need _posixsubprocess,
# ctypes needs _ctypes, shutil holds rmtree and move.
_BLOCKED_MODULES = ["_posixsubprocess", "_ctypes", "ctypes", "multiprocessing", "pty", "resource", "shutil"]


def _guard():
    import posix

    for module_name, names in _GUARDED.items():
        for module in [sys.modules[module_name]] + ([posix] if module_name == "os" else []):
            for name in names:
                if hasattr(module, name):
                    setattr(module, name, None)
    for name in _BLOCKED_MODULES:
        sys.modules[name] = None


def _run(item, result_fd):
    """Run item's program and calls; write the result line to result_fd, then exit the process."""
    program, entry_point, calls = item["program"], item["entry_point"], item["calls"]
    # Everything but the result line goes to /dev/null, at the file-descriptor level too.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    sys.stdin = open(os.devnull)
    sys.stdout = sys.stderr = open(os.devnull, "w")

    # Local references: the guard and the program may overwrite module attributes.
    write, exit_now, dumps, setitimer = os.write, _exit, json.dumps, signal.setitimer
    outputs = [{"ok": False, "error": "NotRun: the program failed before this call"} for _ in calls]
    state = {"call": None, "fired": False}  # call: index of the running call, -1 for the top level

    def finish():
        try:
            line = (MARKER + dumps(outputs) + "\n").encode()
            while line:
                line = line[write(result_fd, line) :]
        finally:
            exit_now(0)  # no atexit handlers or finalizers of the program after the line

    def timed_out(call):
        # The call that ran out of time fails (every call, for the top level: -1); later ones are not run.
        for j in range(max(0, call), len(calls)):
            if j == call or call < 0:
                outputs[j] = _error(_Timeout())
            else:
                outputs[j] = {"ok": False, "error": "NotRun: an earlier call timed out"}

    def on_alarm(signum, frame):
        if state["fired"]:
            # The program swallowed the first _Timeout: stop running it and report now.
            timed_out(state["call"])
            finish()
        state["fired"] = True
        raise _Timeout()

    def timed(call, fn):
        state["call"], state["fired"] = call, False
        # Fires after CALL_TIMEOUT_S, then every 0.5 s should the program swallow the first one.
        setitimer(signal.ITIMER_REAL, CALL_TIMEOUT_S, 0.5)
        try:
            return fn()
        finally:
            setitimer(signal.ITIMER_REAL, 0)

    signal.signal(signal.SIGALRM, on_alarm)
    _guard()
    namespace = {"__name__": "__candidate__"}
    try:
        timed(-1, lambda: exec(compile(program, "<program>", "exec"), namespace))
        fn = namespace.get(entry_point)
        if not callable(fn):
            raise NameError(f"the program defines no function {entry_point!r}")
    except BaseException as e:  # noqa: BLE001 - anything the program raises fails every call
        if isinstance(e, _Timeout):
            timed_out(-1)
        else:
            outputs[:] = [_error(e)] * len(calls)
        finish()

    for i, args in enumerate(calls):
        try:
            value = timed(i, lambda: _to_json(fn(*args), [MAX_VALUE_CHARS]))
            try:
                dumps(value, allow_nan=False)  # what the reader gets; an int of 5000 digits fails here
            except ValueError as e:
                raise _Unserialisable(f"not encodable ({e})") from None
            outputs[i] = {"ok": True, "value": value}
        except _Unserialisable as e:
            outputs[i] = {"ok": False, "error": f"unserialisable: the result is {e}"}
        except BaseException as e:  # noqa: BLE001 - the program's errors are results
            if isinstance(e, _Timeout):
                timed_out(i)
                break
            outputs[i] = _error(e)
    finish()


def _fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def _read_item(path):
    try:
        if path == "-":
            item = json.load(sys.stdin)
        else:
            with open(path) as f:
                item = json.load(f)
    except (OSError, ValueError) as e:
        _fail(f"cannot read the item: {e}")
    if not (
        isinstance(item, dict)
        and isinstance(item.get("program"), str)
        and isinstance(item.get("entry_point"), str)
        and isinstance(item.get("calls"), list)
        and all(isinstance(c, list) for c in item["calls"])
    ):
        _fail('the item must be {"program": str, "entry_point": str, "calls": [[args...], ...]}')
    return item


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    serve = len(argv) == 3 and argv[0] == "--serve"
    if not serve and (len(argv) != 1 or argv[0] in ("-h", "--help")):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if os.environ.get("PYTHONHASHSEED") != "0":
        # String hashing must not vary between runs (set order shows in some outputs): restart
        # with a fixed seed before reading anything, so that stdin is still unread.
        os.execve(sys.executable, [sys.executable, "-m", "micro_humaneval.execute"] + argv,
                  dict(os.environ, PYTHONHASHSEED="0"))
    if serve:
        _serve(int(argv[1]), float(argv[2]))
        return
    item = _read_item(argv[0])
    sys.stdout.flush()
    _run(item, os.dup(1))


if __name__ == "__main__":
    main()
