"""Generated tile programs: small TileLang programs that Hypothesis writes from attention's building blocks.

A program is data (harness.programs.model): one kernel launch over a symbolic length `n`
(`T.ceildiv(n, block)` blocks of `threads` threads), named buffers, and a list of statements. Each
statement kind is one module here, holding its record, what the statement reads and writes, its validity
rules, its TileLang text and its meaning as torch text, side by side:

    STATEMENT                     its record: a frozen dataclass (a model.Statement) with the kind's op and fields
    check(stmt, program, scope)   raise ProgramError unless the statement is valid where it stands
    reads(stmt) / writes(stmt)    buffer names; `full(stmt, program)`: it defines every element it writes
    tilelang(stmt, program, at)   lines of the prim_func body
    torch(stmt, program, at)      lines of the float64 reference (the interpreter)

The generator (generate.py) only composes statements whose rules hold, so a program it writes is valid
by construction and a disagreement is the compiler's. Nothing here imports TileLang or Hypothesis:
emit.py writes source text, and the generator is handed Hypothesis's strategies module. A new kind is
one module plus one line in STATEMENT_KINDS.
"""
from harness.programs import (
                              atomic,
                              copy,
                              fill,
                              gemm,
                              loop,
                              overrun,
                              parallel,
                              reduce,
                              scan,
                              split,
                              stream,
                              thread,
                              thread_atomic,
                              when,
)

# op name -> its module.
STATEMENT_KINDS = {"copy": copy, "fill": fill, "gemm": gemm, "reduce": reduce, "map": parallel, "atomic": atomic,
                   "scan": scan, "loop": loop, "stream": stream, "when": when,
                   "thread": thread, "thread_atomic": thread_atomic, "split": split, "overrun": overrun}
