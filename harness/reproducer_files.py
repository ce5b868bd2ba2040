"""Where reproducer files are: reproducers/<group>/<id>.json, one per failure signature.

The id is the first 12 hex digits of the SHA-1 of the failure signature, so it is stable across machines and across
minimization (which keeps the signature), and one bug gets one file. Every lookup of a reproducer's file goes through
here: `paths` lists them, `find` resolves an id or a unique prefix of one, `file_path` says where one goes,
`known_signatures` reads them all.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from harness.reproducer_loading import load
from harness.reproducer_model import FOLDER_OF_KIND, ID, KNOWN, RecordError, Reproducer


def signature_id(signature) -> str:
    return hashlib.sha1(json.dumps(list(signature)).encode()).hexdigest()[:12]


def file_name(id: str) -> str:
    """The name of a reproducer's file, in whichever group (a bisect state names its reproducer so)."""
    return f"{id}.json"


def file_path(root, kind: str, id: str) -> Path:
    """Where the reproducer `id` of `kind` lives under the reproducers folder `root`: root/<group>/<id>.json."""
    return Path(root) / FOLDER_OF_KIND[kind] / file_name(id)


def paths(root) -> list[Path]:
    """Every reproducer file under `root`, group by group in FOLDER_OF_KIND's order, each sorted by id. A folder of
    reproducers without groups (one group's, as `--dir reproducers/examples`) lists its own."""
    root = Path(root)
    return [p for folder in (root, *(root / group for group in FOLDER_OF_KIND.values())) for p in sorted(folder.glob("*.json"))]


def save(rep: Reproducer, root) -> Path:
    """Write `rep` into its group under `root` (file_path()), replacing what was there."""
    return save_as(rep, file_path(root, rep.kind, rep.id))


def save_as(rep: Reproducer, to) -> Path:
    """Write `rep` to the file `to`, replacing what was there (a minimized reproducer replaces its file)."""
    to = Path(to)
    to.parent.mkdir(parents=True, exist_ok=True)
    to.write_text(json.dumps(rep.to_dict(), indent=2) + "\n")
    return to


def free_id(signature, root) -> str:
    """The signature's id, unless a reproducer whose signature was edited since (a sharper
    message) holds that id: then the first free id of (signature, 2), (signature, 3), ..."""
    taken = {p.stem for p in paths(root)}
    id, n = signature_id(signature), 1
    while id in taken:
        n += 1
        id = signature_id([*signature, n])
    return id


def known_signatures(root, broken: list | None = None, kinds=KNOWN) -> dict:
    """{signature: path} of the readable reproducers of `kinds` under `root` (the known bugs: no candidate); the
    unreadable files' paths go to `broken`."""
    known = {}
    for p in paths(root):
        try:
            rep = load(p)
        except RecordError:
            if broken is not None:
                broken.append(p)
            continue
        if rep.kind in kinds:
            known.setdefault(rep.signature, p)
    return known


def skipped_line(root, broken: list) -> str:
    """The one warning for the files under `root` that are not reproducers (known_signatures' `broken`)."""
    names = ", ".join(p.name for p in broken[:3]) + (f" and {len(broken) - 3} more" if len(broken) > 3 else "")
    return f"{root}: {len(broken)} .json file(s) are not reproducers, skipped ({names}; `harness repro FILE` says why)"


def find(id_or_path, root="reproducers") -> Path:
    """A path to an existing file, an id under `root` (in any group), or a unique prefix of one."""
    p = Path(id_or_path)
    try:
        if p.is_file():
            return p
        folder = p.is_dir()
    except OSError as e:  # a name too long for a file, say
        raise RecordError(f"no reproducer file {str(id_or_path)[:60]!r}: {e.strerror or e}") from None
    if not ID.fullmatch(str(id_or_path)):  # a path (loop.json, dir/x), not an id: no <dir>/loop.json.json to name
        raise RecordError(f"no reproducer file {str(id_or_path)[:80]!r}" + (f": {p} is a directory" if folder else "")
                          + ("" if folder or "/" in str(id_or_path) else
                             "; an id is 1 to 64 letters, digits, '_' or '-'"))
    matches = [m for m in paths(root) if m.stem.startswith(str(id_or_path))]
    exact = [m for m in matches if m.stem == str(id_or_path)]
    if exact or len(matches) == 1:
        return (exact or matches)[0]
    if matches:
        raise RecordError(f"{id_or_path!r} is ambiguous in {root}: {', '.join(m.stem for m in matches)}")
    raise RecordError(f"no reproducer {id_or_path!r}: not a file, and no {file_name(id_or_path)} in {root} or its "
                      f"groups ({', '.join(FOLDER_OF_KIND.values())})")
