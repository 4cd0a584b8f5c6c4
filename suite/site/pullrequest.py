"""The leaderboard's pull-request gate and its answer: what `race submit --check` and
`race leaderboard comment` do for the project's workflow (.github/workflows/leaderboard.yml).

A submission is a pull request that adds files to the submissions folder: a report and the
ledger it references. The gate reads the change (the files a git base ref and HEAD differ in, or a
list of them) and refuses, each with a rule ID naming the file:

- BOARD-003: a change that edits or removes a file already in the submissions folder (another
  submission, or its ledger) -- a submission is only ever added;
- BOARD-004: a change to the maintained run descriptions (leaderboard/published/), which the
  maintainers change in pull requests of their own;
- BOARD-005: an added file that is neither a report (*.json) nor a ledger (*.jsonl) a report of
  the change references;
- every finding of `race validate --strict` on each added report, checked with its ledger;
- the board's own rules (suite.site.board): BOARD-001 a run id already listed, BOARD-002 a
  published run that is not a maintained rebuild, and a duplicate of a listed report.

Only the changed submissions are validated: the folder's others were checked when they came in.
The comment sets each new row beside its neighbours at similar total FLOPs and the field's
published runs: the allocation as a text bar, p, FLOPs per trained token and the implied
utilization of the stated hardware.
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Sequence

from ..errors import RaceError
from ..record.report import Report, read_report


@dataclass(frozen=True)
class Change:
    """One changed file: git's status letter (A added, M modified, D deleted, T type changed) and
    its path relative to the repository root (POSIX form)."""

    status: str
    path: str


@dataclass(frozen=True)
class Added:
    """An added report that passed the gate: its path, document and content id."""

    path: Path
    doc: dict
    id: str


@dataclass
class Verdict:
    """What the gate decided: the reports it accepts and every finding (validator and board) that
    refuses the change."""

    accepted: list[Added] = field(default_factory=list)
    findings: list[Any] = field(default_factory=list)     #: suite.validate.Finding, all errors
    reports: int = 0                                      #: added reports looked at

    @property
    def ok(self) -> bool:
        return not self.findings


# ----------------------------------------------------------------------------- the change

def _git(repo: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise RaceError("git is not installed", "install git, or give the changed files with --changed FILE") from None
    except subprocess.TimeoutExpired:
        raise RaceError(f"git {' '.join(args)} took over 120 s", "check the repository") from None
    if done.returncode != 0:
        raise RaceError(f"git {' '.join(args)}: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'failed'}",
                        "give a base the repository knows (a branch, tag or commit; fetch it first: "
                        "actions/checkout with fetch-depth: 0)")
    return done.stdout


def changes_from_git(repo: Path, base: str) -> list[Change]:
    """The files HEAD changes since it left `base` (`git diff --name-status base...HEAD`: against
    their merge base, so what the base branch gained meanwhile is not the pull request's)."""
    if base.startswith("-"):
        raise RaceError(f"--base {base!r} is not a git ref", "give a branch, tag or commit")
    out = _git(repo, "diff", "--name-status", "--no-renames", "-z", f"{base}...HEAD", "--")
    parts = [p for p in out.split("\0") if p]
    return [Change(parts[i][0], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]


def changes_from_list(text: str, where: str = "--changed") -> list[Change]:
    """Changes given as `git diff --name-status` prints them: one `STATUS<TAB>PATH` a line."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        status, sep, path = line.partition("\t")
        if not sep or not status or status[0] not in "ACDMTRU" or not path.strip():
            raise RaceError(f"{where} line {n}: {line[:80]!r} is not 'STATUS<TAB>PATH'",
                            "write it as `git diff --name-status --no-renames BASE...HEAD` prints it")
        out.append(Change(status[0], path.strip()))
    return out


def _under(path: str, folder: str) -> str | None:
    """`path` relative to `folder` when it lies inside it (one level: submissions are flat)."""
    p, f = PurePosixPath(path), PurePosixPath(folder)
    try:
        rel = p.relative_to(f)
    except ValueError:
        return None
    return str(rel)


# ----------------------------------------------------------------------------- the gate

def _finding(rule: str, file: str, message: str, hint: str, path: str = "$") -> Any:
    from ..validate import Finding

    return Finding(rule, "error", file, path, message, hint)


def check(changes: Sequence[Change], repo: Path, submissions: str = "leaderboard/submissions",
          published: str = "leaderboard/published") -> Verdict:
    """Judge a change to the submissions folder (`submissions`, `published`: folders relative to
    the repository root `repo`, whose work tree holds the changed files). Returns the Verdict:
    accepted reports and every finding that refuses the change (validated under --strict)."""
    from ..validate import validate_report
    from ..validate.output import apply_strict
    from . import board
    from .ids import submission_id

    repo = Path(repo)
    folder = repo / submissions
    verdict = Verdict()
    added_reports, added_ledgers = [], set()
    for c in changes:
        rel = _under(c.path, submissions)
        if _under(c.path, published) is not None:
            verdict.findings.append(_finding(
                "BOARD-004", c.path, f"the change touches the maintained run description {c.path} ({c.status})",
                "a submission adds files to the submissions folder only; the maintainers change "
                f"{published}/ in pull requests of their own"))
            continue
        if rel is None:
            continue                            # code and docs: reviewed as code, not by this gate
        if c.status != "A":
            what = {"D": "removes", "M": "edits", "T": "changes the type of"}.get(c.status, "changes")
            verdict.findings.append(_finding(
                "BOARD-003", c.path, f"the change {what} {rel}, a file already in the submissions folder",
                "a pull request only adds its own report and ledger; to correct a listed run, its submitter asks "
                "the maintainers to replace it"))
        elif "/" in rel or rel.startswith("."):
            verdict.findings.append(_finding("BOARD-005", c.path, f"{rel} is not a file of the submissions folder itself",
                                             "add the report and its ledger at the top of the folder (race submit)"))
        elif (folder / rel).is_symlink() or not (folder / rel).is_file():
            verdict.findings.append(_finding("BOARD-005", c.path, f"{rel} is not a plain file (a symbolic link, or "
                                             "missing from the work tree): submissions are plain files",
                                             "add the report and its ledger themselves (race submit)"))
        elif rel.endswith(".json"):
            added_reports.append(rel)
        elif rel.endswith(".jsonl"):
            added_ledgers.add(rel)
        else:
            verdict.findings.append(_finding("BOARD-005", c.path, f"{rel} is neither a report (.json) nor a ledger (.jsonl)",
                                             "a submission is one report and the ledger it references"))
    added = set(added_reports)
    listed: dict[str, str] = {}       # run id -> file, of the reports the folder already held
    ids: dict[str, str] = {}          # content id -> file
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if p.name in added or p.name.startswith("."):
            continue
        try:
            doc = read_report(p, check=False).doc
        except (RaceError, ValueError):
            continue
        rid = (doc.get("run") or {}).get("id") if isinstance(doc.get("run"), dict) else None
        if isinstance(rid, str):
            listed.setdefault(rid, p.name)
        ids[submission_id(doc)] = p.name
    known = None
    referenced = set()
    for rel in added_reports:
        where = f"{submissions}/{rel}"
        verdict.reports += 1
        try:
            doc = read_report(folder / rel, check=False, name=where).doc
        except RaceError as e:
            verdict.findings.append(_finding("INPUT-001", where, e.message, e.hint or "submit a report v1 JSON file"))
            continue
        found = apply_strict(validate_report(doc, base_dir=folder, file=where))
        verdict.findings.extend(found)
        led = doc.get("ledger")
        if isinstance(led, dict) and isinstance(led.get("path"), str):
            referenced.add(led["path"])
        if found:
            continue
        sid = submission_id(doc)
        if sid in ids:
            verdict.findings.append(_finding("BOARD-001", where, f"duplicate of {ids[sid]} (same content, id {sid})",
                                             "a run is submitted once"))
            continue
        if board.claims_published(doc) and known is None:
            known = board.maintained(repo / published)
        refusal = board.board_refusal(doc, sid, known or board.Maintained(), listed)
        if refusal:
            verdict.findings.append(_finding(refusal[0], where, refusal[1],
                                             "submit your own run under a run id of its own, without sources.published",
                                             "$.run.id" if refusal[0] == "BOARD-001" else "$.sources.published"))
            continue
        listed[doc["run"]["id"]] = rel
        ids[sid] = rel
        verdict.accepted.append(Added(folder / rel, doc, sid))
    for rel in sorted(added_ledgers - referenced):
        verdict.findings.append(_finding("BOARD-005", f"{submissions}/{rel}", f"the ledger {rel} is referenced by no "
                                         "report of the change", "add the report that references it, or leave it out"))
    return verdict


def next_steps(stored: Path, ledger: Path | None, submissions: Path) -> str:
    """What a submitter does after `race submit`: the files to commit and the pull request."""
    files = [stored] + ([ledger] if ledger else [])
    names = " ".join(str(p) for p in files)
    return "\n".join([
        "next: open a pull request that adds these files (and nothing else under the submissions folder):",
        f"  git switch -c submit-{stored.stem}",
        f"  git add {names}",
        f"  git commit -m 'leaderboard: submit {stored.stem}'",
        f"  git push -u origin submit-{stored.stem}   # then open the pull request",
        f"check it as the project's workflow will: race submit --check --base origin/main --submissions {submissions}",
        "the workflow validates only your files (race validate --strict, with the ledger), refuses a change to "
        "another submission, and answers with a comparison to runs at similar total FLOPs and the published runs",
    ])


# ----------------------------------------------------------------------------- the comment

BAR_WIDTH = 20


def text_bar(shares: dict[str, float], width: int = BAR_WIDTH) -> str:
    """The allocation as text: `width` letters R (rollout), U (update), W (reward), largest
    remainders rounded so the letters always number `width`."""
    phases = (("rollout", "R"), ("update", "U"), ("reward", "W"))
    raw = [max(0.0, float(shares.get(ph, 0.0))) * width for ph, _ in phases]
    counts = [math.floor(x) for x in raw]
    for i in sorted(range(3), key=lambda i: raw[i] - counts[i], reverse=True)[:width - sum(counts)]:
        counts[i] += 1
    return "".join(letter * n for (_, letter), n in zip(phases, counts))


def _util(r: Report) -> str:
    hw = r.hardware
    u = hw.utilization(r.total_flops) if hw is not None else None
    if u is None:
        return "— (no hours stated)"
    return f"{100 * u:.1f}% of {hw.count} × {hw.accelerator}"


def _line(r: Report, name: str, badge: str) -> str:
    from .formatting import pct, sci

    s = r.shares
    per_token = r.total_flops / r.tokens["update"] if r.tokens.get("update") else None
    return (f"| {name} | {badge} | {sci(r.total_flops)} | `{text_bar(s)}` R {pct(s['rollout'])} · U {pct(s['update'])} · "
            f"W {pct(s['reward'])} | {r.update_share:.3f} | {sci(per_token)} | {_util(r)} |")


def _cell_text(text: str) -> str:
    """A submitter's text inside a Markdown table cell: no pipes, no line breaks, no markup, no
    mentions or links GitHub would render."""
    from ..textsafe import clean

    t = clean(str(text), newlines=False).replace("|", "/").replace("`", "'").replace("<", "‹").replace(">", "›")
    t = t.replace("@", "@\u200b").replace("[", "(").replace("]", ")")
    return t[:120]


def comment(new: Sequence[Added], folder: Path, *, neighbours: int = 3, published: Path | None = None) -> str:
    """The pull request's comparison comment (Markdown): per accepted report, its row beside the
    `neighbours` listed runs nearest in total FLOPs (log scale) and the maintained published runs."""
    from . import board
    from .leaderboard import load_submissions

    folder = Path(folder)
    known = board.maintained(published if published is not None else board.default_published(folder))
    listed = load_submissions(folder, check=False, maintained=known).submissions
    new_ids = {a.id for a in new}
    others = [s for s in listed if s.id not in new_ids]
    pub = sorted((s for s in others if known.holds(s.id)), key=lambda s: -Report(s.doc).total_flops)
    runs = [s for s in others if not known.holds(s.id)]
    head = ["| run | how obtained | total FLOPs | allocation (R rollout · U update · W reward) | p | FLOPs per "
            "trained token | implied utilization |", "|---|---|---|---|---|---|---|"]
    out = ["## RACE leaderboard: how this submission compares", ""]
    if not new:
        return "\n".join(out + ["No report of this pull request passed the check; see the findings above.", ""])
    for a in new:
        r = Report(a.doc, a.path.name)
        me = board.badge(a.doc, a.id, known, ledger_verified=isinstance(a.doc.get("ledger"), dict))
        out += [f"### {_cell_text(r.label or r.run_id)} (`{a.id}`)", "",
                f"{_cell_text(r.model)}, reward system `{_cell_text(r.reward_system)}`, {r.declared_steps:,} steps; "
                f"{me.label}.", ""]
        near = sorted(runs, key=lambda s: (abs(math.log10(max(Report(s.doc).total_flops, 1)) -
                                               math.log10(max(r.total_flops, 1))), s.filename))[:neighbours]
        rows = [_line(r, f"**{_cell_text(r.label or r.run_id)}** (this pull request)", me.label)]
        for s in sorted(near, key=lambda s: -Report(s.doc).total_flops):
            o = Report(s.doc)
            b = board.badge(s.doc, s.id, known, ledger_verified=isinstance(s.doc.get("ledger"), dict))
            rows.append(_line(o, _cell_text(o.label or o.run_id), b.label))
        out += ["Runs at similar total FLOPs:", "", *head, *rows, ""]
    if pub:
        out += ["The field's published runs, re-accounted (estimates from their published setups):", "", *head]
        for s in pub:
            o = Report(s.doc)
            out.append(_line(o, _cell_text(o.label or o.run_id), board.badge(s.doc, s.id, known,
                                                                               ledger_verified=False).label))
        out.append("")
    out += ["FLOPs per trained token: total FLOPs over the tokens the update trained on. Implied utilization: total "
            "FLOPs over the stated accelerators' peak for the stated hours.", ""]
    return "\n".join(out)


def write_comment(text: str, path: Path) -> Path:
    """The comment, written atomically."""
    from ..atomic import write_text_atomic

    return write_text_atomic(path, text)


__all__ = ["Change", "Added", "Verdict", "changes_from_git", "changes_from_list", "check", "comment",
           "next_steps", "text_bar", "write_comment"]
