"""The field's published runs, rebuilt: every run description in leaderboard/published/*.yaml
becomes a report through `race report --estimate`'s own path (build_estimate, validated under
--strict), is stored in leaderboard/submissions/ as `race submit` stores it, and the page
docs/field.md ("The field's runs, re-accounted") is regenerated from those reports. A tool of the
checkout (tools/ is never installed); tests/test_published.py reruns it into a temporary folder
and compares byte for byte.

    .venv/bin/python tools/published.py          # rebuild the reports and the page
    .venv/bin/python tools/published.py --check  # exit 1 when a committed file differs
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from suite.errors import RaceError  # noqa: E402

PUBLISHED = ROOT / "leaderboard" / "published"
SUBMISSIONS = ROOT / "leaderboard" / "submissions"
PAGE = ROOT / "docs" / "field.md"
from suite.site.board import PUBLISHED_CREATED as CREATED  # noqa: E402  (every rebuild: byte for byte the same)


def reports(folder: Path = PUBLISHED) -> list[tuple[str, dict]]:
    """(run description name, report document) of every published run, validated under --strict:
    any finding at all refuses the whole rebuild."""
    from suite.site.board import rebuild
    from suite.validate import validate_report

    out = []
    for path in sorted(folder.glob("*.yaml")):
        doc = rebuild(path)            # the board's own rebuild: a stored row is maintained only as this
        findings = validate_report(doc, file=path.name)
        if findings:
            raise RaceError(f"{path.name}: " + "; ".join(f"{f.rule_id} at {f.path}: {f.message}" for f in findings),
                            "published runs must validate under --strict")
        out.append((path.name, doc))
    return out


def is_published(doc: dict) -> bool:
    """A stored report of a published run (what a rebuild owns and may replace)."""
    return isinstance(doc, dict) and isinstance(doc.get("sources"), dict)


def build(submissions: Path = SUBMISSIONS, page: Path = PAGE, folder: Path = PUBLISHED,
          built: list[tuple[str, dict]] | None = None) -> list[str]:
    """Rebuild the published reports (`built`, default: `reports(folder)`) into `submissions`
    (stale ones removed, other submissions untouched) and the generated block of `page`.
    Returns the stored file names."""
    from suite import jsonstrict
    from suite.atomic import write_block_atomic, write_json_atomic
    from suite.record.report import Report
    from suite.site.field import BEGIN, END, page as field_page
    from suite.site import board
    from suite.site.leaderboard import submit

    built = reports(folder) if built is None else built
    for old in submissions.glob("*.json"):
        try:
            doc = jsonstrict.load(old)
        except (OSError, ValueError):
            continue
        if is_published(doc):
            old.unlink()
    names = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, doc in built:
            path = Path(tmp) / f"{Path(name).stem}.json"
            write_json_atomic(path, doc)
            names.append(submit(path, submissions, maintained=board.of(built)).path.name)
    write_block_atomic(page, BEGIN, END, field_page([Report(d, n) for n, d in built]))
    return sorted(names)


def check(built: list[tuple[str, dict]] | None = None) -> list[str]:
    """The committed files that a rebuild (of `built`, default: every published run) would
    change; empty when all agree."""
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        subs, page = Path(tmp) / "submissions", Path(tmp) / "field.md"
        shutil.copytree(SUBMISSIONS, subs)
        shutil.copy(PAGE, page)
        build(subs, page, built=built)
        differ = [p.name for p in sorted(subs.glob("*.json")) if not (SUBMISSIONS / p.name).is_file()
                  or (SUBMISSIONS / p.name).read_bytes() != p.read_bytes()]
        differ += [p.name for p in sorted(SUBMISSIONS.glob("*.json")) if not (subs / p.name).is_file()]
        if page.read_bytes() != PAGE.read_bytes():
            differ.append("docs/field.md")
    return differ


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = p.parse_args(argv)
    try:
        if args.check:
            differ = check()
            for name in differ:
                print(f"differs: {name}")
            return 1 if differ else 0
        for name in build():
            print(f"leaderboard/submissions/{name}")
        print(f"wrote {PAGE.relative_to(ROOT)}")
        return 0
    except RaceError as e:
        print(f"published: {e.message}" + (f"\n  hint: {e.hint}" if e.hint else ""), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
