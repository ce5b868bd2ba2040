"""Checks on registers: register_budget (setmaxnreg past the register file), registers_across_roles (a
fragment loaded by every thread, read in one role), short_register_arrays (a fragment's array too short)."""
from __future__ import annotations

import re

from harness import cuda_features
from harness.codegen.barriers import _ROLE, _roles_with
from harness.codegen.source import LineFinding
from harness.result import ScanCheck

_SETMAXNREG = (("setmaxnreg", re.compile(r"tl::warpgroup_reg_(alloc|dealloc)<(\d+)>\(\)()")),)
REGISTERS_PER_SM = 65536  # sm_90: setmaxnreg.inc waits until the SM's register file can grant it


def register_budget(source: str) -> list[LineFinding]:
    """Warp-specialized roles whose setmaxnreg targets, times their threads, exceed the register
    file: the increase can never be granted and its warps wait forever (a one-block-per-SM kernel)."""
    asked, line = [], 0
    for role, count, nodes in _roles_with(source, _SETMAXNREG):
        regs = [n for n in nodes if n[0] == "op"]
        if regs:
            asked.append((role, count, int(regs[0][3])))
            line = max(line, regs[0][5])
    total = sum(count * regs for _, count, regs in asked)
    if total <= REGISTERS_PER_SM:
        return []
    parts = " + ".join(f"{count} x {regs} ({role})" for role, count, regs in asked)
    return [LineFinding(ScanCheck.register_budget, line, f"setmaxnreg asks {parts} = {total} registers, more than the "
                        f"{REGISTERS_PER_SM} of an SM: a deadlock")]


_LOCAL_ARRAY = re.compile(r"^  (?:float|half_t|bfloat16_t|double|int) (\w+)\[\d+\];$")  # at the kernel's top level
_NAME = re.compile(r"[A-Za-z_]\w*")
_SPLIT = re.compile(r"^  if \((.+)\) \{$")

# What an assignment writes: `((float2*)(&x))[0] = `, `*(float4*)(x + i) = `, `uint2 x = `, `x[0] = `.
_TARGET = (re.compile(r"\(&\(?(\w+)\)?\)"), re.compile(r"^\*\([^)]*\*\)\((\w+)"), re.compile(r"(\w+)(?:\[[^\]]*\])*$"))


def _target(lhs: str) -> str | None:
    lhs = lhs.strip()
    m = next((m for m in (p.search(lhs) for p in _TARGET) if m), None)
    return m.group(1) if m else None


def registers_across_roles(source: str) -> list[LineFinding]:
    """A register array (a fragment) filled with data the block's threads loaded, before the kernel splits into
    warp-specialized roles, then read inside one role: the role's threads are fewer than those that hold the data,
    so each reads its own share of a layout meant for all (12eba470b947: half the tile is never stored, or stored
    at another thread's place). Data: a value that depends on threadIdx, through any chain of assignments; a
    constant fill is the same in every thread and is fine."""
    lines = source.splitlines()
    split = next((n for n, line in enumerate(lines) if (m := _SPLIT.match(line)) and _ROLE.match(m.group(1))), None)
    if split is None:
        return []
    arrays = {m.group(1) for line in lines[:split] if (m := _LOCAL_ARRAY.match(line))}
    loaded = {"threadIdx"}  # names whose value differs from thread to thread, in program order
    for line in lines[:split]:
        lhs, eq, rhs = line.partition(" = ")
        if eq and set(_NAME.findall(rhs)) & loaded and (target := _target(lhs)):
            loaded.add(target)
    found, seen, depth = [], set(), 0
    for n, line in enumerate(lines[split:], split + 1):
        _, eq, rhs = line.partition(" = ")
        for name in sorted((set(_NAME.findall(rhs if eq else line)) & arrays & loaded) - seen):
            seen.add(name)
            found.append(LineFinding(ScanCheck.registers_across_roles, n, f"{name} holds data every thread loaded before the "
                                     f"warp-specialized split (line {split + 1}: `{lines[split].strip()}`) and is read here, "
                                     "inside one role, whose threads are fewer than those that hold it"))
        depth += line.count("{") - line.count("}")
        if depth == 0:  # the end of the split's if/else: every thread again
            break
    return found


def short_register_arrays(source: str, fragments: dict[str, int]) -> list[LineFinding]:
    """A fragment's register array smaller than the elements each thread of the block must hold of it (`fragments`:
    name -> elements; cuda_features.per_thread): the layout has lost elements."""
    wanted = cuda_features.per_thread(source, fragments)
    return [LineFinding(ScanCheck.short_register_arrays, 0, f"register array {name}[{size}] holds fewer than the {wanted[name]} "
                        f"elements per thread of fragment {name} ({fragments[name]} over the block's threads)")
            for name, size in cuda_features.register_arrays(source).items() if size < wanted.get(name, 0)]
