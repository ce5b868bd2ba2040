"""Two runs' verdicts on the same cases, side by side: how many of each, and every case whose verdict or
signature (tensor, region) differs.

    python benchmarks/verdicts.py BEFORE/results.jsonl AFTER/results.jsonl

A kernel whose float atomics add in another order from run to run errs by other amounts each time, and a
timing race may show only sometimes: a difference is to be read, not simply a regression.
"""
import argparse
import json
from collections import Counter
from pathlib import Path


def read(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            out.setdefault(r["case_id"], r)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    a = p.parse_args()
    before, after = read(a.before), read(a.after)
    both = before.keys() & after.keys()
    print(f"before {dict(Counter(r['verdict'] for r in before.values()))}")
    print(f"after  {dict(Counter(r['verdict'] for r in after.values()))}")
    differ = [c for c in sorted(both) if any(before[c].get(k) != after[c].get(k) for k in ("verdict", "tensor", "region"))]
    print(f"{len(both)} cases in both ({len(before.keys() - both)} only before, {len(after.keys() - both)} only after); "
          f"{len(differ)} differ in verdict, tensor or region")
    for c in differ:
        b, f = before[c], after[c]
        print(f"  {c} {b['case'].get('family') if isinstance(b.get('case'), dict) else ''}: "
              f"{b['verdict']} {b.get('tensor') or ''} {b.get('region') or ''} -> {f['verdict']} {f.get('tensor') or ''} "
              f"{f.get('region') or ''}: {(f.get('message') or b.get('message') or '')[:160]}")


if __name__ == "__main__":
    main()
