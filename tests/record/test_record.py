"""`tracetui record -- python train.py`: an unedited CPU training script recorded, checked from the
raw JSON; one file per rank under torchrun (gloo); a failing script leaves a valid trace."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

TRAIN = '''
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 16), torch.randn(8, 4)
fail_at = int(sys.argv[1]) if len(sys.argv) > 1 else -1
for i in range(8):
    if i == fail_at:
        raise RuntimeError(f"boom at iteration {i}")
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
print("trained", sys.argv[1:])
'''

DDP = '''
import torch, torch.distributed as dist
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(5):
    opt.zero_grad()
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
dist.destroy_process_group()
'''


def record(tmp_path: Path, *program: str, opts=()) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "tracetui", "record", "-o", str(out), *opts, "--", *program],
                       capture_output=True, text=True, timeout=240, cwd=tmp_path,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    return r, out


def events(path: Path) -> tuple[list[dict], dict]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return doc["traceEvents"], doc


def inside(evs: list[dict], outer: dict) -> list[dict]:
    """Events on the outer event's thread within its interval (what the step ran)."""
    lo, hi = outer["ts"], outer["ts"] + outer["dur"]
    return [e for e in evs if e.get("ph") == "X" and e.get("tid") == outer["tid"] and lo <= e["ts"] <= hi and e is not outer]


def steps_of(evs: list[dict]) -> list[dict]:
    return sorted((e for e in evs if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")),
                  key=lambda e: e["ts"])


def test_records_an_unedited_training_script(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    r, out = record(tmp_path, sys.executable, "train.py", "-1", opts=("--stack",))
    assert r.returncode == 0, r.stderr
    assert "trained ['-1']" in r.stdout  # its own argv, its own output
    files = list(out.glob("*.pt.trace.json.gz"))
    assert len(files) == 1
    evs, doc = events(files[0])
    run = doc["tracetui"]["run"]  # one per `tracetui record`: two runs into one folder never share a name
    assert [f.name for f in files] == [f"{socket.gethostname()}.{run}.rank0.pt.trace.json.gz"]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary left behind
    # schedule wait 1, warmup 1, active 3 over 8 optimizer steps: iterations 2, 3, 4 are recorded
    steps = steps_of(evs)
    assert [s["name"] for s in steps] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    for s in steps:  # each step: one forward (two Linear -> addmm), one backward, one SGD step
        names = Counter(e["name"] for e in inside(evs, s))
        assert names["aten::addmm"] == 2 and names["Optimizer.step#SGD.step"] == 1
        assert names["aten::mse_loss"] == 1 and names["aten::zero_"] + names["Optimizer.zero_grad#SGD.zero_grad"] >= 1
    prov = doc["tracetui"]
    assert prov["recorder"] == "record" and prov["torch"] == torch.__version__
    assert prov["rank"] == 0 and prov["world_size"] == 1 and prov["step_marker"] == "optimizer"
    assert prov["with_stack"] and any(e.get("cat") == "python_function" for e in evs)
    from tracetui.model import load_trace
    rule = load_trace(files[0]).self_time  # the recorded version picks torch's self-time rule
    assert rule.reason == f"recorded torch version {torch.__version__}"
    # afterwards: the summary of what was written, which reads the same steps
    assert "3 step(s)" in r.stdout and "recorded by tracetui record" in r.stdout


def test_a_failing_script_leaves_a_valid_trace_and_its_exit_code(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    r, out = record(tmp_path, sys.executable, "train.py", "4", opts=("--steps", "Optimizer.step"))
    plain = subprocess.run([sys.executable, "-c", "raise RuntimeError('x')"], capture_output=True)
    assert r.returncode == plain.returncode == 1
    assert "RuntimeError: boom at iteration 4" in r.stderr and "record_boot" not in r.stderr
    (f,) = out.glob("*.pt.trace.json.gz")
    evs, doc = events(f)  # valid gzip, valid JSON
    # --steps Optimizer.step: a step ends where the SGD step's record_function ends; iteration 4
    # raised before its optimizer step, so #2 and #3 are whole and #4 holds what ran of it
    steps = steps_of(evs)
    assert [s["name"] for s in steps][:2] == ["ProfilerStep#2", "ProfilerStep#3"]
    for s in steps[:2]:
        assert Counter(e["name"] for e in inside(evs, s))["Optimizer.step#SGD.step"] == 1
    assert doc["tracetui"]["step_marker"] == "record_function:Optimizer.step"
    from tracetui.model import load_trace
    assert load_trace(f).n_steps == len(steps)


@pytest.mark.skipif(shutil.which("torchrun") is None and not Path(sys.executable).with_name("torchrun").exists(),
                    reason="torchrun not installed")
def test_torchrun_gloo_writes_one_trace_per_rank(tmp_path):
    (tmp_path / "ddp.py").write_text(DDP)
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    r, out = record(tmp_path, torchrun, "--standalone", "--nproc_per_node", "2", "ddp.py")
    assert r.returncode == 0, r.stderr[-3000:]
    files = sorted(out.glob("*.pt.trace.json.gz"))
    host = socket.gethostname()
    run = events(files[0])[1]["tracetui"]["run"]  # the ranks of one run share its id
    assert [f.name for f in files] == [f"{host}.{run}.rank0.pt.trace.json.gz", f"{host}.{run}.rank1.pt.trace.json.gz"]
    for rank, f in enumerate(files):
        evs, doc = events(f)
        assert doc["tracetui"]["rank"] == rank and doc["tracetui"]["world_size"] == 2
        assert doc.get("distributedInfo", {}).get("rank", rank) == rank
        assert [s["name"] for s in steps_of(evs)] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
        assert any("allreduce" in str(e.get("name", "")).lower() for e in evs)  # DDP's gradient sync was recorded


def test_program_forms_and_errors(capsys):
    """What record runs for each accepted form; anything else is one line and exit 2."""
    from tracetui.cli.main import CliError, main
    from tracetui.record.launcher import build_command, split_argv
    from tracetui.record.boot import BOOT
    assert split_argv(["record", "-o", "d", "--stack", "python", "t.py", "-o", "x"]) == \
        (["record", "-o", "d", "--stack"], ["python", "t.py", "-o", "x"])  # the program's own -o stays its own
    assert build_command(["python3", "-u", "-X", "dev", "-m", "pkg.train", "--lr", "1"], CliError) == \
        (["python3", "-u", "-X", "dev", "-c", BOOT, "module", "pkg.train", "--lr", "1"], "python")
    assert build_command(["train.py", "a"], CliError)[0] == [sys.executable, "-c", BOOT, "script", "train.py", "a"]
    cmd, kind = build_command(["torchrun", "--nproc_per_node", "2", "-m", "pkg.train", "--x", "1"], CliError)
    assert kind == "torchrun" and cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert cmd[3:] == ["--nproc_per_node", "2", "--no-python", sys.executable, "-c", BOOT, "module", "pkg.train", "--x", "1"]
    for argv, says in ((["record"], "name the program"), (["record", "--", "ls", "-l"], "not a Python program"),
                       (["record", "--", "python", "-c", "print(1)"], "-c"),
                       (["record", "--steps", "(", "--", "python", "t.py"], "regular expression")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("tracetui: error: record: ") and says in err and err.count("\n") == 1, err


OWN_PROFILER = '''
import torch
from torch.profiler import profile, ProfilerActivity
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def train(n):
    for i in range(n):
        opt.zero_grad(); model(torch.randn(8, 16)).sum().backward(); opt.step()
train(int(__import__("sys").argv[1]))
with profile(activities=[ProfilerActivity.CPU]) as p:
    train(4)
p.export_chrome_trace("own_trace.json")
print("own profiler done")
'''


@pytest.mark.parametrize("before", [0, 3])  # our recorder waiting, or in the middle of recording
def test_a_program_with_its_own_profiler_keeps_it(tmp_path, before):
    """Kineto holds one session per process: two at once crashed the program (exit 139) and lost
    its own trace. The recorder now steps aside, says so, and the program's trace is whole."""
    (tmp_path / "own.py").write_text(OWN_PROFILER)
    r, out = record(tmp_path, sys.executable, "own.py", str(before))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "own profiler done" in r.stdout
    assert "started its own torch.profiler" in r.stderr and "steps aside" in r.stderr
    own = json.loads((tmp_path / "own_trace.json").read_text())["traceEvents"]
    # its 4 iterations: one Linear forward (addmm) and one SGD step each
    names = Counter(e.get("name") for e in own if e.get("ph") == "X")
    assert names["aten::addmm"] == 4 and names["Optimizer.step#SGD.step"] == 4
    if before:  # what we recorded before stepping aside was written, and is a valid trace
        (f,) = out.glob("*.pt.trace.json.gz")
        assert steps_of(events(f)[0])
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_a_full_disk_never_changes_the_programs_exit_code(tmp_path):
    """Under a file size limit the export fails: the program still exits 0 with its own output,
    the message says the write failed (not 'fewer steps than wait + warmup'), no temporary left."""
    import resource
    (tmp_path / "train.py").write_text(TRAIN)
    out = tmp_path / "out"
    out.mkdir()

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, 16 << 10))
    r = subprocess.run([sys.executable, "-m", "tracetui", "record", "-o", str(out), "--", sys.executable, "train.py"],
                       capture_output=True, text=True, timeout=240, cwd=tmp_path, preexec_fn=small_files,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "trained" in r.stdout and "Traceback" not in r.stderr
    assert "failed" in r.stderr and "nothing recorded: writing" in r.stderr
    assert "fewer than" not in r.stderr
    assert list(out.iterdir()) == []  # no .json.tmp, no Kineto .json.tmp.tmp


SLEEPER = '''
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever SIGINT disposition we inherited
open("pid", "w").write(str(os.getpid()))
try:
    time.sleep(120)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(42)
'''


@pytest.mark.parametrize("sig, code", [("SIGINT", 42), ("SIGHUP", 128 + 1), ("SIGTERM", 128 + 15)])
def test_signals_sent_to_record_reach_the_program(tmp_path, sig, code):
    """kill -INT/-HUP/-TERM on tracetui's PID alone: the program gets it (SIGINT was ignored, and
    SIGHUP left the program running, orphaned)."""
    import signal
    import time
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    p = subprocess.Popen([sys.executable, "-m", "tracetui", "record", "-o", "out", "--", sys.executable, "sleeper.py"],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid_file = tmp_path / "pid"
    deadline = time.monotonic() + 120
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    child = int(pid_file.read_text())
    p.send_signal(getattr(signal, sig))
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == code, stderr[-2000:]
    assert ("interrupted" in stdout) == (sig == "SIGINT")
    with pytest.raises(ProcessLookupError):  # the program is gone, not orphaned
        os.kill(child, 0)


def test_a_program_that_never_started_is_told_from_one_that_took_no_step(tmp_path):
    """A missing script or module, or a syntax error: Python's own message and exit code, then
    'did not start', never 'no optimizer step was taken'."""
    (tmp_path / "bad.py").write_text("def f(:\n    pass\n")
    (tmp_path / "nostep.py").write_text("print('ran')\n")
    for program in (["missing.py"], ["bad.py"], ["-m", "no_such_module_xyz"]):
        plain = subprocess.run([sys.executable, *program], capture_output=True, text=True, cwd=tmp_path)
        r, _ = record(tmp_path, sys.executable, *program)
        assert r.returncode == plain.returncode != 0, (program, r.stderr)
        assert "nothing recorded: the program did not start" in r.stderr, r.stderr
        assert "optimizer step" not in r.stderr and "Traceback" not in r.stderr
        last = plain.stderr.strip().splitlines()[-1]  # Python's own last line (its path to python aside)
        assert last.split(": ", 1)[-1] in r.stderr, (last, r.stderr)
    r, _ = record(tmp_path, sys.executable, "nostep.py")
    assert r.returncode == 0 and "ran" in r.stdout
    assert "nothing recorded: no optimizer step was taken" in r.stderr


COUNTER = '''
import os, signal, sys, time
got = []
signal.signal(signal.SIGINT, lambda s, f: got.append(s))
open("pid", "w").write(str(os.getpid()))
deadline = time.monotonic() + 60
while not got and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(1.5)  # a second SIGINT (one forwarded on top of the terminal's) would land here
print(f"SIGINT x{len(got)}", flush=True)
sys.exit(42)
'''


def test_ctrl_c_in_a_terminal_reaches_the_program_once(tmp_path):
    """A terminal's Ctrl-C goes to the whole foreground group, the program included: record must
    not forward it a second time (only a SIGINT sent to record's PID alone is passed on)."""
    import pty
    import time
    (tmp_path / "counter.py").write_text(COUNTER)
    pid, fd = pty.fork()
    if pid == 0:  # the child: tracetui record in the pty's foreground group
        os.chdir(tmp_path)
        os.execv(sys.executable, [sys.executable, "-m", "tracetui", "record", "-o", "out", "--",
                                  sys.executable, "counter.py"])
    deadline = time.monotonic() + 120
    while not ((tmp_path / "pid").exists() and (tmp_path / "pid").read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    os.write(fd, b"\x03")  # Ctrl-C, as typed
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the pty's other side closed
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 42, out.decode(errors="replace")[-2000:]
    assert b"SIGINT x1" in out, out.decode(errors="replace")[-2000:]


def _own_trace(r: subprocess.CompletedProcess, out: Path) -> Path:
    """The trace a run says it wrote (its stderr's file list), checked against its summary."""
    names = [ln.strip() for ln in r.stderr.splitlines() if ln.startswith("  ") and ln.strip().endswith(".pt.trace.json.gz")]
    assert len(names) == 1, r.stderr
    assert r.stdout.count(names[0] + ":") == 1  # the summary printed afterwards is of that file
    return out / names[0]


def test_two_runs_one_after_the_other_keep_both_recordings(tmp_path):
    """issue 44 item 3: the second run into a folder silently replaced the first one's trace."""
    (tmp_path / "train.py").write_text(TRAIN)
    r1, out = record(tmp_path, sys.executable, "train.py", "-1")
    first = _own_trace(r1, out)
    kept = first.read_bytes()
    r2, _ = record(tmp_path, sys.executable, "train.py", "-2")
    second = _own_trace(r2, out)
    assert r1.returncode == r2.returncode == 0 and first != second
    assert sorted(out.glob("*.pt.trace.json.gz")) == sorted([first, second])
    assert first.read_bytes() == kept  # untouched by the second run
    for f, argv in ((first, "-1"), (second, "-2")):
        assert events(f)[1]["tracetui"]["program"].endswith(f"train.py {argv}")  # each its own run


def test_two_concurrent_runs_keep_both_and_each_summarises_its_own(tmp_path):
    """Run concurrently, both said "wrote", one trace was lost, and run A printed B's summary."""
    (tmp_path / "train.py").write_text(TRAIN)
    out = tmp_path / "out"
    procs = {argv: subprocess.Popen([sys.executable, "-m", "tracetui", "record", "-o", str(out), "--",
                                     sys.executable, "train.py", argv], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                    env={**os.environ, "OMP_NUM_THREADS": "1"}) for argv in ("-3", "-4")}
    done = {}
    for argv, p in procs.items():
        o, e = p.communicate(timeout=240)
        done[argv] = subprocess.CompletedProcess(p.args, p.returncode, o, e)
    own = {argv: _own_trace(r, out) for argv, r in done.items()}
    assert all(r.returncode == 0 for r in done.values())
    assert own["-3"] != own["-4"] and sorted(out.glob("*.pt.trace.json.gz")) == sorted(own.values())
    for argv, f in own.items():
        assert events(f)[1]["tracetui"]["program"].endswith(f"train.py {argv}")
        assert f"trained ['{argv}']" in done[argv].stdout


def test_a_trace_is_never_placed_over_another(tmp_path):
    """boot.place: the last step of writing a trace refuses a name that is taken (a rename would
    replace it); the temporary stays for the caller to remove, the other trace is untouched."""
    from tracetui.record.boot import place
    tmp, final = tmp_path / ".x.tmp", tmp_path / "h.run.rank0.pt.trace.json.gz"
    tmp.write_bytes(b"new")
    final.write_bytes(b"other run")
    with pytest.raises(FileExistsError, match="already there"):
        place(tmp, final)
    assert final.read_bytes() == b"other run"
    final.unlink()
    place(tmp, final)
    assert final.read_bytes() == b"new" and not tmp.exists()
