"""harness reduce: a standalone reproducer shrunk while it still says REPRODUCED, by delta debugging (picire).

The predicate is the file's own check. A candidate text is run as `python repro.py` in a fresh temporary
directory, under a timeout (its whole process group is killed past it). It is interesting when its stdout has
the line starting with REPRODUCED that the unreduced file printed, and it exits with the same status: the same
line, so that another failure which also says REPRODUCED is not taken for this one, and the same status, so that
the result still exits 1 as `git bisect run` reads it; and, unless the unreduced file did, without an uncaught
exception (whose exit 1 is not the check's). No transformation weakens the check itself: an `if` whose branches
hold the REPRODUCED text is never replaced by one of them (that would print it whatever happened), nor an `if`
testing the same condition (the check's exit status).
A candidate Python cannot compile is never run (compile() first: most deletions break the syntax, and cost
nothing that way). Outcomes are kept by the file's text (sha256), one small file each in a cache directory, so
that picire's parallel tests (forked processes) share them and no text runs twice.

Passes, repeated until a round changes nothing:
1. statements: the top-level definitions that nothing reaches dropped in one test, then ddmin over the module's
   top-level statements, then over each body that is left (functions, loops, branches, handlers), outermost
   first;
2. simplifications, one at a time, each kept only if the file still reproduces:
   - a function specialized to the literal arguments every call gives it (harness.pysource.substitute);
   - a name assigned once replaced by what it is assigned (literals first);
   - an `if` (statement or expression) replaced by one of its branches;
   - a call to a function of the file inlined: a statement-level call (a T.macro's) by the body, an
     expression call by the one return expression;
   - a parameter nothing reads dropped, with what the calls pass for it;
   - a keyword argument dropped (of a T.*/tilelang.* call, or one that a function of the file defaults);
3. lines: ddmin over the lines left, so the result is 1-minimal by lines too.
Every candidate is ast.unparse'd (no comments, no blank lines); ruff (where installed: imports sorted, unused
names dropped, `ruff format`) lays the result out, kept only if it still reproduces.

Modules: candidates (the predicate: a candidate run and its outcome cached), ddmin (picire's ddmin, the statement
and line passes), simplify (the simplifications), reduction (the passes in rounds, the result written). Standard
library and picire only: the reducer runs where the bug shows, a GPU machine for a wrong value or an out-of-bounds
write, with TileLang and torch only for the file itself; `harness reduce` (harness.commands.reduce) is its command.
"""
