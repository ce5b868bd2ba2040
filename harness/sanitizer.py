"""NVIDIA compute-sanitizer: the command line for a reproducer's replay, and its report parsed.

The sanitizer is the precise, slow second look at a failure, never the oracle (guard bands are, see bands.py).
Measured on an H100: memcheck with its defaults missed fp32 atomic adds landing ~2 KB past a 256 KB tensor,
with or without PyTorch's caching allocator; with the caching allocator off and `--padding` it reported them.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, replace

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
DEFAULT_PATH = "/usr/local/cuda/bin/compute-sanitizer"
PADDING = 65536  # bytes memcheck leaves unallocated after each allocation, so a write just past one is out of bounds
PRINT_LIMIT = 100
ERROR_EXITCODE = 99  # the exit status when the tool found errors: distinct from the reproducer's own 0/1/2/125


class SanitizerError(ValueError):
    """compute-sanitizer cannot be run as asked (unknown tool, no binary); the message is one line."""


def binary() -> str:
    """The compute-sanitizer executable: on PATH, else where the CUDA toolkit installs it."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    if os.access(DEFAULT_PATH, os.X_OK):
        return DEFAULT_PATH
    raise SanitizerError(f"compute-sanitizer not found on PATH nor at {DEFAULT_PATH}")


def command(tool: str, argv: list[str], log_file=None) -> tuple[list[str], dict[str, str]]:
    """The command line running `argv` under `tool`, and the environment variables to add to it. With
    `log_file` the tool writes its report there, not on stdout (a worker's stdout is the pool's protocol)."""
    if tool not in TOOLS:
        raise SanitizerError(f"unknown sanitizer tool {tool!r}: choose one of {', '.join(TOOLS)}")
    padding = ["--padding", str(PADDING)] if tool == "memcheck" else []
    # --target-processes all: the harness runs kernels in worker subprocesses.
    cmd = [binary(), "--tool", tool, *padding, "--print-limit", str(PRINT_LIMIT), "--error-exitcode", str(ERROR_EXITCODE),
           "--target-processes", "all", *(["--log-file", str(log_file)] if log_file else []), *argv]
    # Without this the caching allocator carves tensors out of one big cudaMalloc and a write past a tensor
    # lands inside a valid allocation, unseen.
    return cmd, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}


@dataclass(frozen=True)
class Hazard:
    """One kind of error in one kernel, as the tool first reported it, and how many times it was reported."""
    kind: str  # "Invalid __global__ atomic of size 4 bytes", "Race reported between Write access and Read access"
    kernel: str | None = None
    count: int = 1
    severity: str = "error"  # racecheck also reports "warning"s
    source: str | None = None  # "tvm_kernels.cu:212", where the kernel was built with line info
    thread: str | None = None  # "(17,0,0)"
    block: str | None = None
    relation: str | None = None  # the address against memory: "out of bounds", "misaligned", "2049 bytes after ..."
    offset_bytes: int | None = None
    side: str | None = None  # "after" | "before" the nearest allocation
    allocation_size: int | None = None

    def describe(self) -> str:
        where = ", ".join(filter(None, [self.source, self.thread and f"thread {self.thread}",
                                        self.block and f"block {self.block}"]))
        text = self.kind + (f" in {self.kernel}" if self.kernel else "") + (f" ({where})" if where else "")
        if self.side is not None:
            text += f": {self.offset_bytes} bytes {self.side} an allocation of {self.allocation_size} bytes"
        elif self.relation:
            text += f": address {self.relation}"
        prefix = "warning: " if self.severity == "warning" else ""
        return prefix + text + (f" (reported {self.count} times)" if self.count > 1 else "")


@dataclass(frozen=True)
class Report:
    """The tool's findings: its error count (None when it printed no summary) and the hazards, deduplicated."""
    tool: str
    errors: int | None
    hazards: tuple[Hazard, ...] = ()
    warnings: int = 0

    @property
    def clean(self) -> bool:
        return self.errors == 0 and not self.hazards

    def describe(self) -> str:
        if self.clean:
            return f"compute-sanitizer {self.tool} found no errors"
        if self.errors is None:
            head = f"compute-sanitizer {self.tool} printed no error summary (the run did not finish)"
        else:
            head = f"compute-sanitizer {self.tool}: {self.errors} error{'s' if self.errors != 1 else ''}"
            head += f", {self.warnings} warning{'s' if self.warnings != 1 else ''}" if self.warnings else ""
        return "\n".join([head, *(h.describe() for h in self.hazards)])


_PREFIX = re.compile(r"^={8,9}(?!=) ?(.*)$")  # "========= " begins every line the tool prints (not pytest's "=====...")
_NUMBER = r"\d[\d,]*"
_ERROR_SUMMARY = re.compile(rf"^ERROR SUMMARY: ({_NUMBER}) errors?", re.M)
_RACE_SUMMARY = re.compile(rf"^RACECHECK SUMMARY: {_NUMBER} hazards? displayed\s*\(({_NUMBER}) errors?, ({_NUMBER}) warnings?\)",
                           re.M)
_NOT_A_HAZARD = re.compile(r"^(COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|\(\d|Target application returned"
                           r"|Error: process didn't terminate|This tool is deprecated)")
_SEVERITY = re.compile(r"^(Error|Warning): ")
_RACE = re.compile(r"^Race reported between (\w+) access at (.+?)\s+and (\w+) access at .+$")
_THREAD = re.compile(r"^by thread (\(\S+\)) in block (\(\S+\))")
_ADDRESS = re.compile(r"^Address 0x[0-9a-fA-F]+(?: is (.+?))?\.?$")
_NEAREST = re.compile(rf"^({_NUMBER}) bytes (after|before) (?:the nearest allocation at 0x[0-9a-fA-F]+|a block) "
                      rf"of size ({_NUMBER})")
_SOURCE_KERNEL = re.compile(r"^(?P<source>\S+?:\d+):(?P<kernel>.+)$")  # older tools: "file.cu:120:MatMulKernel(...)"


def parse(text: str, tool: str = "memcheck") -> Report:
    """The report in the tool's output (stdout or --log-file; the program's own lines are skipped).

    With --target-processes all each process prints its own summary: the counts are summed.
    """
    body = "\n".join(m.group(1) for m in map(_PREFIX.match, text.splitlines()) if m)
    errors = [_int(n) for n in _ERROR_SUMMARY.findall(body)]
    races = [(_int(e), _int(w)) for e, w in _RACE_SUMMARY.findall(body)]
    if not errors and races:
        errors = [e for e, _ in races]
    warnings = sum(w for _, w in races)
    merged: dict[tuple[str, str | None], Hazard] = {}
    for block in _blocks(body.splitlines()):
        hazard = _hazard(block)
        key = (hazard.kind, hazard.kernel)
        merged[key] = hazard if key not in merged else replace(merged[key], count=merged[key].count + 1)
    return Report(tool, sum(errors) if errors else None, tuple(merged.values()), warnings)


def _blocks(lines: list[str]) -> list[list[str]]:
    """Each reported error: its unindented first line and the indented lines after it, stripped."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in lines:
        if line[:1].isspace() and current is not None:
            current.append(line.strip())
        elif line.strip() and not line[:1].isspace() and not _NOT_A_HAZARD.match(line):
            current = [line.strip()]
            blocks.append(current)
        else:
            current = None  # a blank line or a summary ends the block
    return blocks


def _hazard(block: list[str]) -> Hazard:
    first, rest = block[0], block[1:]
    severity = "error"
    if m := _SEVERITY.match(first):
        severity, first = m.group(1).lower(), first[m.end():]
    fields: dict = {"severity": severity}
    if first.startswith("Race reported between"):
        if rest and rest[0].startswith("and "):  # newer tools put the second access on the next line
            first, rest = f"{first} {rest[0]}", rest[1:]
        if m := _RACE.match(first):
            first = f"Race reported between {m.group(1)} access and {m.group(3)} access"
            fields.update(_site(m.group(2)))
    for line in rest:
        if line.startswith("at ") and "kernel" not in fields:
            fields.update(_site(line[3:]))
        elif m := _THREAD.match(line):
            fields.setdefault("thread", m.group(1))
            fields.setdefault("block", m.group(2))
        elif (m := _ADDRESS.match(line)) and m.group(1):
            fields.setdefault("relation", m.group(1))
            if n := _NEAREST.match(m.group(1)):
                fields.setdefault("offset_bytes", _int(n.group(1)))
                fields.setdefault("side", n.group(2))
                fields.setdefault("allocation_size", _int(n.group(3)))
    return Hazard(kind=first.rstrip("."), **fields)


def _site(text: str) -> dict[str, str]:
    """Kernel and source line of "main_kernel+0x1a30 in /tmp/x/k.cu:212" (newer tools) or "0x1a30 in main_kernel"."""
    text = text.strip()
    location, _, where = text.partition(" in ")
    if re.fullmatch(r"0x[0-9a-fA-F]+", location):  # older: the offset, then the kernel (maybe after file:line:)
        if m := _SOURCE_KERNEL.match(where):
            return {"kernel": m.group("kernel"), "source": os.path.basename(m.group("source"))}
        return {"kernel": where} if where else {}
    kernel = re.sub(r"\+0x[0-9a-fA-F]+$", "", location)
    site = {"kernel": kernel}
    if re.fullmatch(r"\S+:\d+", where):
        site["source"] = os.path.basename(where)  # generated sources sit in a fresh temporary directory each run
    return site


def _int(text: str) -> int:
    return int(text.replace(",", ""))
