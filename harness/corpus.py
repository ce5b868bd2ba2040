"""A campaign's corpus of generated programs, and the rounds that feed it back into the campaign's cases.

A program whose compiled CUDA shows a code feature (harness.cuda_features, a result's `features`), or a pair of
features, that no program before it in the campaign showed is kept: its JSON in <out>/corpus/, one file per program
named by a hash of its text. Later cases mutate corpus programs (harness.programs.mutate) besides the drawn ones:
a mutant runs at the lengths, input seeds and knobs of its parent's cases.

The campaign runs its cases in rounds (`Feedback.run`). After each round its results are offered to the corpus in the
order of its cases, not of their completion, and the next round's mutants come from a random.Random seeded by the
campaign's seed and the round's number: a seed gives the same corpus and the same mutants wherever the compiler gives
the same code. Mutants are appended to cases.jsonl before they run, as drawn cases are written before theirs; a
resumed campaign offers the results it holds first, and draws its later mutants anew.
"""
from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from pathlib import Path

from harness.case import Case
from harness.programs import generate, model, mutate
from harness.result import Result

SHARE = 1 / 3          # of a campaign's program cases: mutants
ROUND_PROGRAMS = 4     # programs per worker in a round (fewer rounds: less waiting for a round's last compile)


class Corpus:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.features: set[str] = set()
        self.pairs: set[tuple[str, str]] = set()
        self.entries: dict[str, list[Case]] = {}  # kept program's text -> its cases run so far, in order

    def offer(self, result: Result) -> bool:
        """Take in a program case's result; True if its program joins the corpus (a feature or pair not seen yet)."""
        text = result.case.program
        if not text or result.features is None:
            return False
        if text in self.entries:
            self.entries[text].append(result.case)
            return False
        features = set(result.features)
        pairs = {(a, b) for a in features for b in features if a < b}
        new = bool(features - self.features or pairs - self.pairs)
        self.features |= features
        self.pairs |= pairs
        if new:
            self.entries[text] = [result.case]
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / f"{hashlib.sha1(text.encode()).hexdigest()[:12]}.json").write_text(text + "\n")
        return new

    def mutants(self, rng: random.Random, count: int, per_kernel: int, taken: set) -> list[Case]:
        """Up to `count` new cases (ids not in `taken`, which they join): mutants of corpus programs, each at up to
        `per_kernel` of its parent's cases (those with the knobs of the first)."""
        out, parents = [], list(self.entries)
        for _ in range(3 * count):  # a parent may have no valid mutant, or one already run
            if len(out) >= count or not parents:
                break
            text = rng.choice(parents)
            child = mutate.mutate(model.from_json(text), rng, generate.insert)
            if child is None:
                continue
            cases = self.entries[text]
            for c in [c for c in cases if c.knobs == cases[0].knobs][:per_kernel]:
                m = c.replace(program=model.to_json(child)).validate()
                if m.id not in taken and len(out) < count:
                    taken.add(m.id)
                    out.append(m)
        return out


class Feedback:
    """Runs a campaign's cases in rounds, adding mutants of its corpus between them until `budget` mutant cases ran
    (SHARE of the campaign's cases; `share` 0: one round of the drawn cases, nothing added)."""

    def __init__(self, corpus: Corpus, share: float, budget: int, seed: int, per_kernel: int, workers: int,
                 taken: set, append: Callable[[list[Case]], None]):
        self.corpus, self.share, self.left, self.seed = corpus, share, budget, seed
        self.per_kernel, self.taken, self.append = per_kernel, taken, append
        self.size = max(1, ROUND_PROGRAMS * workers * per_kernel)

    def run(self, pool, todo: list[Case], deadline=None):
        """Yield each case's result as pool.run does: `todo`'s, then the mutants drawn after each round."""
        fresh, round_ = list(todo), 0
        size = self.size if self.share else max(1, len(fresh))
        pending = [] if fresh or not self.share else self._draw(min(size, self.left), round_)  # a resumed run's rest
        while fresh or pending:
            drawn, fresh = fresh[:size], fresh[size:]
            batch = pending + drawn
            got = {}
            for r in pool.run(batch, deadline):
                got[r.case_id] = r
                yield r
            if len(got) < len(batch):  # the deadline cut the round short
                return
            for c in batch:
                self.corpus.offer(got[c.id])
            round_ += 1
            want = round(len(drawn) * self.share / (1 - self.share)) if fresh else size
            pending = self._draw(min(want, self.left), round_) if self.share else []

    def _draw(self, count: int, round_: int) -> list[Case]:
        rng = random.Random(f"{self.seed}/{round_}")
        cases = self.corpus.mutants(rng, count, self.per_kernel, self.taken) if count > 0 else []
        self.left -= len(cases)
        if cases:
            self.append(cases)
        return cases
