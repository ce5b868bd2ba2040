"""What a bisect step or a matrix cell runs inside the environment of one TileLang release or commit.

Another TileLang cannot be imported into this process, so harness.bisect.environments starts
`python -m harness.bisect.inside` with that release first on PYTHONPATH. It reads one request (a JSON
object on stdin: a ReplayRequest or a CampaignRequest) and answers one JSON object, the only line on its
stdout: Replayed, Ran, or {"error": why} for input it cannot use (a reproducer that does not load, an
examples tree of another release). Its stderr is the parent's to quote when a step cannot test.
"""
from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from harness import campaign, replay, reproducer_loading, reproducer_model, untrusted
from harness.case import CaseError
from harness.environment import environment
from harness.result import Result
from harness.status import Status


@dataclass(frozen=True)
class ReplayRequest:
    """Replay `reproducer` `runs` times (`fresh`: a compile each), the workers' logs under `logs`; an outside
    kernel's with the examples tree `examples`."""
    reproducer: str
    runs: int
    logs: str
    fresh: bool = False
    examples: str | None = None


@dataclass(frozen=True)
class CampaignRequest:
    """Run the cases of the JSON-lines file `cases` (a campaign's results and reproducers in `out`); outside
    kernels with the examples tree `examples`."""
    cases: str
    out: str
    examples: str | None = None


REQUESTS = {"replay": ReplayRequest, "campaign": CampaignRequest}


@dataclass(frozen=True)
class Replayed:
    """What a replay there says of the recorded bug: its status, verdict, and each run's result in words."""
    status: Status
    verdict: str
    now: tuple[str, ...] = ()

    @property
    def evidence(self) -> str:
        """The verdict and the first run's result, in one line (a bisect's table, a matrix's log)."""
        return self.verdict + (f" | {self.now[0]}" if self.now else "")

    def to_dict(self) -> dict:
        return {"status": self.status.value, "verdict": self.verdict, "now": list(self.now)}

    @classmethod
    def from_dict(cls, d: dict) -> Replayed:
        return cls(Status(d["status"]), str(d["verdict"]), tuple(map(str, d["now"])))


@dataclass(frozen=True)
class Ran:
    """A campaign there: its exit status (harness.campaign.run) and how many of its results had each verdict."""
    exit: int
    verdicts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Ran:
        return cls(int(d["exit"]), {str(v): int(n) for v, n in d["verdicts"].items()})


def request_line(request: ReplayRequest | CampaignRequest) -> str:
    kind = next(k for k, cls in REQUESTS.items() if isinstance(request, cls))
    return json.dumps({"request": kind, **asdict(request)})


def _examples(tree: str | None) -> None:
    """Outside kernels load from `tree`, which must be the installed TileLang's (as `--examples` is checked)."""
    if tree:
        from harness.outside import source  # imports torch: only for outside kernels

        source.use(tree, metadata.version("tilelang"))


def replayed(request: ReplayRequest) -> Replayed:
    """`harness repro --json`'s replay, here."""
    rep = reproducer_loading.load(Path(request.reproducer))
    _examples(request.examples)
    out = replay.replay(rep, request.logs, request.runs, env=environment(), fresh=request.fresh)
    return Replayed(out.status, out.verdict, tuple(r.describe() for r in out.results))


def ran(request: CampaignRequest) -> Ran:
    """`harness run --cases-from`'s campaign, here, and its verdicts counted."""
    _examples(request.examples)
    out = Path(request.out)
    code = campaign.run(campaign.Options(out=out, cases_from=Path(request.cases), reproducers=out / "reproducers"))
    results = out / "results.jsonl"
    lines = results.read_text().splitlines() if results.exists() else []
    return Ran(code, dict(Counter(Result.from_dict(untrusted.loads(line)).verdict.value for line in lines if line.strip())))


def answer(message: dict) -> dict:
    """The answer to one request (a decoded JSON object)."""
    kind = message.pop("request", None) if isinstance(message, dict) else None
    if kind not in REQUESTS:
        return {"error": f"no such request {kind!r}: one of {', '.join(REQUESTS)}"}
    try:
        request = REQUESTS[kind](**message)
    except TypeError as e:
        return {"error": f"a {kind} request with other fields: {e}"}
    try:
        return (replayed(request) if kind == "replay" else ran(request)).to_dict()
    except (reproducer_model.RecordError, CaseError, campaign.CampaignError) as e:  # bad input, one line
        return {"error": str(e)}


def main() -> None:
    proto = os.fdopen(os.dup(1), "w")
    # TileLang and the campaign print freely: their report is in its --out, the answer alone goes to stdout.
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    proto.write(json.dumps(answer(json.loads(sys.stdin.read()))) + "\n")
    proto.flush()


if __name__ == "__main__":
    main()
