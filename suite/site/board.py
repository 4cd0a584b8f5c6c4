"""Which row of the board is which, decided from content the suite controls, never from fields a
submitter writes freely: the maintained published runs (rebuilt from leaderboard/published/*.yaml,
a row is one only when its content is such a rebuild), one row per run id, and the badge that says
how each row's numbers were obtained.

The board's own rules (listed in docs/leaderboard.md):

- BOARD-001: one row per run id. A second report with a run id already listed is refused by
  `race submit` and skipped by the build; a maintained published run keeps its id.
- BOARD-002: a report carrying `sources.published` is listed only when it is byte for byte (by
  content id) the rebuild of a maintained run description. A resubmitted published run with other
  numbers (halved means under the same id, label and sources) is refused or skipped.

`provenance.reference_cell` is checked by the validator (suite.validate.board_rules, REF-001):
a listed report that carries it is one of the suite's own cells by content.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..errors import RaceError

PUBLISHED_CREATED = "2026-12-01T00:00:00Z"
"""Every rebuilt published report carries this creation time, so a rebuild is byte for byte the
same (tools/published.py writes them with it)."""


@dataclass(frozen=True)
class Maintained:
    """The maintained published runs: content id -> run description file, and their run ids."""

    ids: dict[str, str] = field(default_factory=dict)
    run_ids: dict[str, str] = field(default_factory=dict)
    reconstructed: frozenset[str] = frozenset()      #: content ids whose setup is reconstructed

    def holds(self, sid: str) -> bool:
        """Whether the submission of content id `sid` is the rebuild of a maintained description."""
        return sid in self.ids


def rebuild(path: Path) -> dict:
    """The report a maintained run description rebuilds into (`race report --estimate`'s path,
    with the fixed creation time): what tools/published.py stores."""
    from ..train.cell import load_cell

    return load_cell(path, check_paths=False).estimate(created=PUBLISHED_CREATED).doc


def maintained(folder: Path | None) -> Maintained:
    """Rebuild every run description in `folder` (leaderboard/published) and note its content id;
    an absent folder maintains nothing. A description that does not rebuild is a RaceError naming
    it: the maintained set must be whole."""
    if folder is None or not Path(folder).is_dir():
        return Maintained()
    built = []
    for path in sorted(Path(folder).glob("*.yaml")):
        try:
            built.append((path.name, rebuild(path)))
        except RaceError as e:
            raise RaceError(f"maintained run description {path.name} does not rebuild: {e.message}",
                            "fix it (tools/published.py --check) before building the board") from None
    return of(built)


def of(built: Iterable[tuple[str, dict]]) -> Maintained:
    """The maintained set of already rebuilt reports: (run description name, report document)."""
    from .ids import submission_id

    ids, runs, recon = {}, {}, set()
    for name, doc in built:
        sid = submission_id(doc)
        ids[sid], runs[doc["run"]["id"]] = name, name
        if (doc.get("sources") or {}).get("published", {}).get("reconstructed"):
            recon.add(sid)
    return Maintained(ids, runs, frozenset(recon))


def default_published(submissions: Path) -> Path:
    """Where the maintained run descriptions sit beside a submissions folder: ../published."""
    return Path(submissions).resolve().parent / "published"


def claims_published(doc: Any) -> bool:
    """Whether a report presents itself as a published run (it carries sources.published)."""
    src = doc.get("sources") if isinstance(doc, dict) else None
    return isinstance(src, dict) and isinstance(src.get("published"), dict)


def board_refusal(doc: dict, sid: str, known: Maintained, listed_run_ids: dict[str, str]) -> tuple[str, str] | None:
    """(rule id, message) when the board refuses a report that passed validation, else None.
    `listed_run_ids` maps run ids already on the board to the file that lists them."""
    if claims_published(doc) and not known.holds(sid):
        return ("BOARD-002", "carries sources.published but is not the rebuild of any maintained run description "
                "(leaderboard/published/*.yaml): a published run is added or corrected as a run description, "
                "which the maintainers rebuild with tools/published.py")
    rid = (doc.get("run") or {}).get("id")
    if isinstance(rid, str) and rid in listed_run_ids:
        return ("BOARD-001", f"run id {rid!r} is already listed by {listed_run_ids[rid]}: one row per run id; "
                "give this run an id of its own (run.id)")
    return None


# ----------------------------------------------------------------------------- badges

@dataclass(frozen=True)
class Badge:
    """How a row's numbers were obtained: a stable key (filters, CSS, tests), the words shown on
    the badge, and what it means (the legend)."""

    key: str
    label: str
    meaning: str


BADGES: dict[str, Badge] = {b.key: b for b in (
    Badge("measured", "measured with ledger",
          "per-step FLOPs recorded while the run trained; its ledger is stored beside the report and "
          "re-summed by the validator"),
    Badge("imported", "imported from an engine log",
          "the per-step ledger rebuilt from an engine's own log (race import); stored and re-summed like a "
          "measured one"),
    Badge("published", "estimated from a published setup",
          "a run of the field re-accounted from its paper's setup by the maintainers "
          "(leaderboard/published/), with the range its assumptions span"),
    Badge("reconstructed", "reconstructed",
          "a published run whose setup is reconstructed from an abstract and summaries, not read from a setup "
          "table: its numbers are assumptions more than facts"),
    Badge("estimated", "estimated by its submitter",
          "totals from a submitter's aggregate numbers (mean lengths, a step count): no per-step ledger"),
    Badge("unverified", "not verified",
          "listed without validation (a preview build): how its numbers were obtained was not checked"),
)}
"""Every badge a row can carry, in the legend's order."""


def badge(doc: dict, sid: str, known: Maintained, *, ledger_verified: bool, checked: bool = True) -> Badge:
    """The badge of a listed report: decided by the maintained set (content ids the suite rebuilt),
    whether its ledger was found in the submissions folder with the sha256 the report states, and
    its provenance method as the validator's PROV rules hold it (measured and imported need a
    ledger; estimated has none). Never from free text, origin labels or sources a submitter adds."""
    if known.holds(sid):
        return BADGES["reconstructed" if sid in known.reconstructed else "published"]
    if not checked:
        return BADGES["unverified"]
    method = (doc.get("provenance") or {}).get("method") if isinstance(doc.get("provenance"), dict) else None
    if ledger_verified and method in (None, "measured"):       # a version 1.0 report: a ledger, no method
        return BADGES["measured"]
    if ledger_verified and method == "imported":
        return BADGES["imported"]
    if method == "estimated" and not ledger_verified:
        return BADGES["estimated"]
    return BADGES["unverified"]


def legend(keys: Iterable[str]) -> list[Badge]:
    """The badges present on a board, in BADGES order."""
    present = set(keys)
    return [b for k, b in BADGES.items() if k in present]
