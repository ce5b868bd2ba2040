"""compute-sanitizer: the command line, and its reports (recorded output of each tool) parsed into hazards."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import sanitizer
from harness.sanitizer import Hazard, SanitizerError
from harness.status import Status

# memcheck --padding 65536 --target-processes all on `harness repro`: the parent process launches no kernel,
# the worker's atomic adds land past dQ_acc (three threads shown), and pytest-style program output is interleaved.
MEMCHECK_ATOMIC = """\
========= COMPUTE-SANITIZER
REPRODUCING 3f9c2a1b7d4e (bwd, float16)
========= Invalid __global__ atomic of size 4 bytes
=========     at main_kernel+0x1a30 in /tmp/tmpabc/tvm_kernels.cu:212
=========     by thread (17,0,0) in block (3,0,0)
=========     Address 0x7f3a5e040801 is 2049 bytes after the nearest allocation at 0x7f3a5e000000 of size 256000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2dfbef]
=========                in /lib/x86_64-linux-gnu/libcuda.so.1
=========
========= Invalid __global__ atomic of size 4 bytes
=========     at main_kernel+0x1a30 in /tmp/tmpabc/tvm_kernels.cu:212
=========     by thread (18,0,0) in block (3,0,0)
=========     Address 0x7f3a5e040805 is 2053 bytes after the nearest allocation at 0x7f3a5e000000 of size 256000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2dfbef]
=========                in /lib/x86_64-linux-gnu/libcuda.so.1
=========
========= Invalid __global__ atomic of size 4 bytes
=========     at main_kernel+0x1a30 in /tmp/tmpabc/tvm_kernels.cu:212
=========     by thread (19,0,0) in block (3,0,0)
=========     Address 0x7f3a5e040809 is 2057 bytes after the nearest allocation at 0x7f3a5e000000 of size 256000 bytes
=========
============================= 1 failed in 41.20s ==============================
========= ERROR SUMMARY: 3 errors
NOT REPRODUCED
========= ERROR SUMMARY: 0 errors
"""

# Older tools name the offset first and the kernel after it (with line info: file:line:kernel); a write of 16
# bytes out of bounds, a misaligned shared read, a read before an allocation, and the launch failure they cause.
MEMCHECK_OLDER = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 16 bytes
=========     at 0x1b80 in main_kernel
=========     by thread (127,0,0) in block (0,5,2)
=========     Address 0x7f9c40000000 is out of bounds
=========     Saved host backtrace up to driver entry point at kernel launch time
=========
========= Invalid __shared__ read of size 4 bytes
=========     at 0x578 in /home/ci/build/flash_bwd.cu:120:_Z16flash_bwd_kernelPfS_(float*, float*)
=========     by thread (5,0,0) in block (1,0,0)
=========     Address 0x3f2 is misaligned
=========
========= Invalid __global__ read of size 2 bytes
=========     at 0x9a0 in main_kernel
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f9c3fffeffa is 6 bytes before the nearest allocation at 0x7f9c3ffff000 of size 1,048,576 bytes
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to \
cudaDeviceSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 4 errors
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at main_kernel+0x3b0 in /tmp/tmpq1/tvm_kernels.cu:88
=========     and Read access at main_kernel+0x4c0 in /tmp/tmpq1/tvm_kernels.cu:95 [2048 hazards]
=========     and Read access at main_kernel+0x4d0 in /tmp/tmpq1/tvm_kernels.cu:95 [2048 hazards]
=========
========= Warning: Race reported between Read access at main_kernel+0x610 in /tmp/tmpq1/tvm_kernels.cu:131
=========     and Write access at main_kernel+0x700 in /tmp/tmpq1/tvm_kernels.cu:140 [64 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""

RACECHECK_OLDER = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at 0x50 in kernel(float *) and Read access at 0x90 in kernel(float *)
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""

RACECHECK_CLEAN = """\
========= COMPUTE-SANITIZER
REPRODUCED 54d466153e16: O mismatch 0.42 > 0.0078
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""

SYNCCHECK = """\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block.
=========     at main_kernel+0x15520 in tvm_kernels.cu:301
=========     by thread (128,0,0) in block (0,0,0)
=========
========= Barrier error detected. Divergent thread(s) in block.
=========     at main_kernel+0x15520 in tvm_kernels.cu:301
=========     by thread (128,0,0) in block (1,0,0)
=========
========= Barrier error detected. Missing wait.
=========     at main_kernel_1+0x1b90
=========     by thread (0,0,0) in block (7,0,0)
=========
========= ERROR SUMMARY: 3 errors
"""

INITCHECK = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at main_kernel+0x70 in /tmp/tmpz9/tvm_kernels.cu:41
=========     by thread (31,0,0) in block (1,0,0)
=========     Address 0x7f3c7ec000fc
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x32e990]
=========                in /lib/x86_64-linux-gnu/libcuda.so.1
=========
========= ERROR SUMMARY: 1 error
"""

MEMCHECK_CLEAN = """\
========= COMPUTE-SANITIZER
REPRODUCED 54d466153e16: O mismatch 0.42 > 0.0078
========= ERROR SUMMARY: 0 errors
"""

# Killed by the timeout while the kernel ran: no summary.
MEMCHECK_CUT = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at main_kernel+0x200 in tvm_kernels.cu:77
=========     by thread (1,0,0) in block (2,0,0)
=========     Address 0x7f0000010000 is 0 bytes after the nearest allocation at 0x7f0000000000 of size 65536 bytes
"""


def test_memcheck_atomic_past_the_end_is_one_hazard_with_the_allocation():
    report = sanitizer.parse(MEMCHECK_ATOMIC, "memcheck")
    assert report.errors == 3 and not report.clean  # summed over the two processes
    assert report.hazards == (Hazard(kind="Invalid __global__ atomic of size 4 bytes", kernel="main_kernel", count=3,
                                     source="tvm_kernels.cu:212", thread="(17,0,0)", block="(3,0,0)",
                                     relation="2049 bytes after the nearest allocation at 0x7f3a5e000000 of size 256000 bytes",
                                     offset_bytes=2049, side="after", allocation_size=256000),)
    assert report.describe().splitlines() == [
        "compute-sanitizer memcheck: 3 errors",
        "Invalid __global__ atomic of size 4 bytes in main_kernel (tvm_kernels.cu:212, thread (17,0,0), block (3,0,0)): "
        "2049 bytes after an allocation of 256000 bytes (reported 3 times)",
    ]


def test_memcheck_older_format_out_of_bounds_misaligned_and_before():
    report = sanitizer.parse(MEMCHECK_OLDER)
    assert report.errors == 4
    write, shared, before, api = report.hazards
    assert (write.kind, write.kernel, write.relation, write.side, write.source) == (
        "Invalid __global__ write of size 16 bytes", "main_kernel", "out of bounds", None, None)
    assert write.describe() == ("Invalid __global__ write of size 16 bytes in main_kernel (thread (127,0,0), block (0,5,2)): "
                                "address out of bounds")
    assert (shared.kind, shared.kernel, shared.source, shared.relation) == (
        "Invalid __shared__ read of size 4 bytes", "_Z16flash_bwd_kernelPfS_(float*, float*)", "flash_bwd.cu:120", "misaligned")
    assert (before.kernel, before.offset_bytes, before.side, before.allocation_size) == ("main_kernel", 6, "before", 1_048_576)
    assert api.kernel is None and api.kind.startswith("Program hit cudaErrorLaunchFailure (error 719)")
    assert report.describe().splitlines()[3].endswith("6 bytes before an allocation of 1048576 bytes")


def test_racecheck_hazards_name_both_accesses_and_keep_warnings_apart():
    report = sanitizer.parse(RACECHECK, "racecheck")
    assert (report.errors, report.warnings) == (1, 1)
    error, warning = report.hazards
    assert (error.kind, error.kernel, error.source, error.severity) == (
        "Race reported between Write access and Read access", "main_kernel", "tvm_kernels.cu:88", "error")
    assert (warning.kind, warning.severity) == ("Race reported between Read access and Write access", "warning")
    assert report.describe().splitlines() == [
        "compute-sanitizer racecheck: 1 error, 1 warning",
        "Race reported between Write access and Read access in main_kernel (tvm_kernels.cu:88)",
        "warning: Race reported between Read access and Write access in main_kernel (tvm_kernels.cu:131)",
    ]


def test_racecheck_older_one_line_format():
    [hazard] = sanitizer.parse(RACECHECK_OLDER, "racecheck").hazards
    assert (hazard.kind, hazard.kernel) == ("Race reported between Write access and Read access", "kernel(float *)")


def test_synccheck_deduplicates_by_kind_and_kernel():
    report = sanitizer.parse(SYNCCHECK, "synccheck")
    assert report.errors == 3
    assert [(h.kind, h.kernel, h.count, h.block) for h in report.hazards] == [
        ("Barrier error detected. Divergent thread(s) in block", "main_kernel", 2, "(0,0,0)"),
        ("Barrier error detected. Missing wait", "main_kernel_1", 1, "(7,0,0)"),
    ]
    assert sanitizer.parse(SYNCCHECK + INITCHECK).errors == 4  # one summary per process (--target-processes all)


def test_initcheck_uninitialized_read():
    [hazard] = sanitizer.parse(INITCHECK, "initcheck").hazards
    assert hazard == Hazard(kind="Uninitialized __global__ memory read of size 4 bytes", kernel="main_kernel",
                            source="tvm_kernels.cu:41", thread="(31,0,0)", block="(1,0,0)")


@pytest.mark.parametrize(("text", "tool"), [(MEMCHECK_CLEAN, "memcheck"), (RACECHECK_CLEAN, "racecheck")])
def test_no_errors_is_said_plainly(text, tool):
    report = sanitizer.parse(text, tool)
    assert report.clean and report.errors == 0 and report.hazards == ()
    assert report.describe() == f"compute-sanitizer {tool} found no errors"


def test_a_run_without_a_summary_did_not_finish():
    report = sanitizer.parse(MEMCHECK_CUT)
    assert report.errors is None and not report.clean
    assert report.describe().splitlines() == [
        "compute-sanitizer memcheck printed no error summary (the run did not finish)",
        "Invalid __global__ write of size 4 bytes in main_kernel (tvm_kernels.cu:77, thread (1,0,0), block (2,0,0)): "
        "0 bytes after an allocation of 65536 bytes",
    ]
    assert not sanitizer.parse("Traceback (most recent call last):\n").clean


def test_command_pads_only_memcheck_and_turns_the_caching_allocator_off(monkeypatch):
    monkeypatch.setattr(sanitizer.shutil, "which", lambda name: f"/opt/cuda/bin/{name}")
    argv, env = sanitizer.command("memcheck", ["harness", "repro", "abc"])
    assert argv == ["/opt/cuda/bin/compute-sanitizer", "--tool", "memcheck", "--padding", "65536", "--print-limit", "100",
                    "--error-exitcode", "99", "--target-processes", "all", "harness", "repro", "abc"]
    assert env == {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    for tool in ("racecheck", "synccheck", "initcheck"):
        argv, _ = sanitizer.command(tool, ["x"])
        assert argv[1:3] == ["--tool", tool] and "--padding" not in argv and argv[-1] == "x"


def test_the_toolkit_path_when_not_on_path(monkeypatch, tmp_path):
    tool = tmp_path / "compute-sanitizer"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setattr(sanitizer.shutil, "which", lambda name: None)
    monkeypatch.setattr(sanitizer, "DEFAULT_PATH", str(tool))
    assert sanitizer.command("synccheck", ["x"])[0][0] == str(tool)


def test_an_unknown_tool_is_one_line():
    with pytest.raises(SanitizerError) as info:
        sanitizer.command("leakcheck", ["x"])
    assert str(info.value) == "unknown sanitizer tool 'leakcheck': choose one of memcheck, racecheck, synccheck, initcheck"
    assert isinstance(info.value, ValueError)


def test_a_missing_binary_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(sanitizer.shutil, "which", lambda name: None)
    monkeypatch.setattr(sanitizer, "DEFAULT_PATH", str(tmp_path / "absent"))
    with pytest.raises(SanitizerError) as info:
        sanitizer.command("memcheck", ["x"])
    assert str(info.value) == f"compute-sanitizer not found on PATH nor at {tmp_path / 'absent'}"
    assert "\n" not in str(info.value)


def test_repro_under_a_sanitizer_refuses_bad_input_in_one_line(monkeypatch, capsys, tmp_path):
    from harness import cli, reproducer_files

    rep = str(reproducer_files.find("59a003a61bcc", Path(__file__).parent.parent / "reproducers"))
    with pytest.raises(SystemExit) as e:  # refused by the parser, before the reproducer is read
        cli.main(["repro", rep, "--sanitize", "leakcheck", "--logs", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "unknown sanitizer tool 'leakcheck'" in err and len(err.strip().splitlines()) == 1
    monkeypatch.setattr(sanitizer.shutil, "which", lambda name: None)
    monkeypatch.setattr(sanitizer, "DEFAULT_PATH", str(tmp_path / "no-compute-sanitizer"))
    assert cli.main(["repro", rep, "--sanitize", "memcheck", "--logs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "compute-sanitizer" in err and len(err.strip().splitlines()) == 1


STAND_IN = """#!/bin/sh
# compute-sanitizer's stand-in: runs the command after its options, then writes a clean report to --log-file.
log=""
while [ $# -gt 0 ]; do
  case "$1" in
    --log-file) log="$2"; shift 2;;
    --tool|--padding|--print-limit|--error-exitcode|--target-processes) shift 2;;
    *) break;;
  esac
done
"$@"
status=$?
{ echo "========= COMPUTE-SANITIZER"; echo "worker $* caching $PYTORCH_NO_CUDA_MEMORY_CACHING";
  echo "========= ERROR SUMMARY: 0 errors"; } > "$log"
exit $status
"""


def test_a_sanitized_replay_runs_its_worker_under_the_tool_through_the_pool(monkeypatch, tmp_path, capsys):
    """No `harness repro` subprocess: the replay's one worker runs under the tool (guard bands and the caching
    allocator off), and the tool's report is read from its log file once the worker ended."""
    from harness import campaign, cli, replay, reproducer_building, reproducer_files
    from harness.case import Case
    from harness.pool import Timeouts
    from harness.result import Result

    tool = tmp_path / "compute-sanitizer"
    tool.write_text(STAND_IN)
    tool.chmod(0o755)
    monkeypatch.setattr(sanitizer.shutil, "which", lambda name: str(tool))
    monkeypatch.setattr(replay, "gpu_count", lambda: 0)  # a compile error replays compile-only, here as on a GPU
    rejected = Case(family="fake", heads=9)  # the compiler rejects it: COMPILE_ERROR, replayed without a GPU
    failed = Result.of(rejected, "COMPILE_ERROR", "compile", "InternalError: rejected")
    rep = reproducer_building.build(failed, {})
    out, report = replay.sanitized(rep, "memcheck", tmp_path / "logs", timeouts=Timeouts(compile=60, run=30))
    assert out.status is Status.FAILS_DIFFERENTLY and out.results[0].verdict == "COMPILE_ERROR", out
    assert report is not None and report.clean and report.describe() == "compute-sanitizer memcheck found no errors"
    log = (tmp_path / "logs" / rep.id / "compute-sanitizer-memcheck.log").read_text()
    assert " --no-bands " in log and "caching 1" in log
    path = reproducer_files.save(rep, tmp_path / "reps")
    opts = campaign.Options(out=tmp_path / "run", sanitize="memcheck", timeouts=Timeouts(compile=60, run=30))
    assert campaign.sanitized(path, opts) == "compute-sanitizer memcheck found no errors"
    assert cli.main(["repro", str(path), "--sanitize", "memcheck", "--logs", str(tmp_path / "cli")]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"reproducer {rep.id}") and printed[-2].startswith("REPRODUCED")
    assert printed[-1] == "compute-sanitizer memcheck found no errors"
