"""The README stays short, its architecture map matches the import-linter layers, and no doc links go stale."""
import re
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, ROOT / "reproducers" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def layers():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layered = next(c for c in contracts if c["name"] == "Data flows one way")["layers"]
    return {m.strip(): i for i, layer in enumerate(layered, 1) for m in re.split(r"[|:]", layer)}


def architecture_map():
    text = README.read_text()
    section = text.split("\n## Architecture\n", 1)[1].split("\n## ", 1)[0]
    return section, {m: int(n) for n, m in re.findall(r"^\s*(\d+)\s+(harness\.\w+)", section, re.M)}


def test_readme_is_short():
    n = len(README.read_text().splitlines())
    assert n <= 150, f"README.md has {n} lines; keep it <= 150 and move detail to docs/"


def test_ci_runs_the_readmes_test_command():
    command = re.search(r"^    (python -m pytest\S*(?: \S+)*)\s+#", README.read_text(), re.M).group(1)
    assert "-rs" in command.split()
    assert re.search(rf"^{re.escape(command)}\s+#", (ROOT / ".ci" / "run").read_text(), re.M), command


def test_architecture_map_matches_the_layers():
    section, mapped = architecture_map()
    expected = layers()
    missing = sorted(set(expected) - set(mapped))
    assert not missing, f"README architecture map lacks these import-linter layer modules: {missing}"
    wrong = {m: (n, expected[m]) for m, n in mapped.items() if m in expected and n != expected[m]}
    assert not wrong, f"README map layer numbers differ from pyproject.toml (module: (README, pyproject)): {wrong}"
    absent = sorted(m for m in set(re.findall(r"harness\.\w+", section))
                    if not (ROOT / "harness" / f"{m[8:]}.py").is_file() and not (ROOT / "harness" / m[8:]).is_dir())
    assert not absent, f"README architecture map names modules with no harness/X.py or harness/X/: {absent}"


def anchors(path):
    headings = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc):
    broken = []
    for link in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        file, _, anchor = link.partition("#")
        target = (doc.parent / file).resolve() if file else doc
        if not target.exists():
            broken.append(f"{link} (no file {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target})")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link} (no heading #{anchor} in {target.relative_to(ROOT)})")
    assert not broken, f"{doc.relative_to(ROOT)}: broken relative links: {broken}"


def _sample(text):
    """(headings, {(family, variant)}, {hazard kind}) of a summary.md text (or the README's indented sample of one)."""
    lines = [line.strip() for line in text.splitlines()]
    headings = [line for line in lines if line.startswith("## ")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| ")]
    pairs = {(r[0], r[1]) for r in rows if len(r) == 4 and r[0] != "family" and r[3].isdigit()}
    hazards = {r[0].split(":", 1)[0] for r in rows if len(r) == 3 and ":" in r[0]}
    return headings, pairs, hazards


@pytest.mark.compile
def test_the_readmes_sample_summary_is_what_the_main_job_writes(tmp_path):
    """The README's main job run afresh (compile-only here): its summary.md has the sample's headings in the same
    order, its families and variants and its hazards. Not the counts: the draw moves them."""
    import os
    import subprocess
    import sys
    main_job = re.search(r"^    pip install -e '\.\[test\]' && harness (run [^#]+?)\s+#", README.read_text(), re.M).group(1)
    subprocess.run([sys.executable, "-m", "harness.cli", *main_job.split()], cwd=tmp_path, check=True,
                   capture_output=True, env={**os.environ, "HARNESS_SERVER": ""})
    section = README.read_text().split("\n## What a run writes\n", 1)[1].split("\n## ", 1)[0]
    sample = "\n".join(line[4:] for line in section.splitlines() if line.startswith("    "))
    want, run = _sample(sample), _sample((tmp_path / "reports" / "run" / "summary.md").read_text())
    assert [h for h in run[0] if h in want[0]] == want[0], run[0]
    assert {f for f, _ in want[1]} == {f for f, _ in run[1]} and want[1] <= run[1], run[1]
    assert want[2] and want[2] <= run[2], run[2]
