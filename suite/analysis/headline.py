"""The current verdict of each claim: which committed study decides it, and why.

Several studies may judge the same claim (every findings document judges all six); the one that
*decides* a claim is the latest study whose design names it — a block of its study.json lists the
claim — by the end of its last session. A study judges claims it was not designed for too (the
decisive study prints verdicts for (a), (b), (d), (e) from one reward, one budget, one target);
those verdicts are listed beside the deciding one, never in its place. Each row carries the
number the verdict rests on, with its interval, and the rule that turned it into the verdict.

Only the exports' findings.json and study.json are read (`race findings --headline`, the first
table of docs/findings.md, which a test regenerates from this module).

    rows = headline([Path("docs/findings"), Path("docs/decisive")])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import RaceError

#: What an export folder holds that the headline reads.
FINDINGS, STUDY = "findings.json", "study.json"


@dataclass(frozen=True)
class Export:
    """One committed study export: its findings and its design."""

    folder: str
    """The folder as given."""
    name: str
    """The study's name (study.json `study.name`)."""
    finished: str
    """End of its last session (UTC, ISO 8601)."""
    cells: int
    """Cells in its design."""
    designed: frozenset[str]
    """Claims its blocks name."""
    findings: dict
    """Its findings.json."""

    def claim(self, cid: str) -> dict:
        """Its findings' entry for claim `cid`."""
        return next(c for c in self.findings["claims"] if c["id"] == cid)


def read_export(folder: str | Path) -> Export:
    """An export folder's findings.json and study.json, read strictly."""
    from .. import jsonstrict

    folder = Path(folder)
    docs = {}
    for name in (FINDINGS, STUDY):
        if not (folder / name).is_file():
            raise RaceError(f"{folder}: no {name}", "name a study export (race findings DIR --export DEST)")
        docs[name] = jsonstrict.read(folder / name, hint="regenerate it: race findings DIR")
    study, sessions = docs[STUDY], docs[STUDY].get("sessions") or []
    if not sessions:
        raise RaceError(f"{folder}/{STUDY}: no session recorded", "a study that has not run decides nothing")
    return Export(folder=_shown(folder), name=study["study"]["name"], finished=sessions[-1]["finished"],
                  cells=len(study.get("cells") or ()),
                  designed=frozenset(c for b in study.get("blocks") or () for c in b.get("claims") or ()),
                  findings=docs[FINDINGS])


def _shown(folder: Path) -> str:
    """The folder relative to the checkout when inside it (no machine path in a table)."""
    from ..paths import home

    try:
        return folder.resolve().relative_to(home().resolve()).as_posix()
    except ValueError:
        return folder.as_posix()


def exports_under(root: str | Path) -> list[Path]:
    """Folders under `root` (one level) holding both findings.json and study.json, sorted."""
    return sorted(p for p in Path(root).iterdir() if (p / FINDINGS).is_file() and (p / STUDY).is_file())


def _e(x: dict, sign: bool = True) -> str:
    f = "+.3f" if sign else ".3f"
    return f"{x['value']:{f}} [{x['low']:{f}}, {x['high']:{f}}]"


def _number(cid: str, c: dict) -> str:
    """The number claim `cid`'s verdict rests on, with its interval (exact counts say so)."""
    ev = c["evidence"]
    if cid == "a":
        if not ev.get("model_runs"):
            return f"rule rewards at most {ev['rule_max_share']:.4f} of FLOPs ({ev['rule_runs']} runs); no reward-model run"
        models = [r for r in ev["by_reward"] if r["max"] > ev["thresholds"]["rule_max"]]
        lo, hi = min(r["min"] for r in models), max(r["max"] for r in models)
        return (f"exact: rule rewards at most {ev['rule_max_share']:.4f} of FLOPs ({ev['rule_runs']} runs), "
                f"the PRM {lo:.3f}-{hi:.3f} ({ev['model_runs']} runs)")
    if cid == "b":
        s, r = ev["step_ratio"], ev["rollout_ratio"]
        return (f"exact: larger/smaller steps x{s['mean']:.2f} ({s['min']:.2f}-{s['max']:.2f}), rollouts "
                f"x{r['mean']:.2f} over {ev['pairs']} matched pairs")
    if cid == "c":
        top = max(ev["comparisons"], key=lambda r: r["diff_adjusted"]["low"])
        where = top["condition"].rsplit(" · ", 1)[-1]
        return (f"{top['small']} minus {top['large']}, best allocations, {where}: {_e(top['diff_adjusted'])} "
                f"(Bonferroni over {len(ev['comparisons'])})")
    if cid == "d":
        tests = sum(v["tests"] for v in ev.values())
        found = sum(len(v["reversals"]) for v in ev.values())
        return f"{found} significant rank reversals in {tests} Bonferroni-adjusted tests over 4 factors"
    if cid == "e":
        st = ev["strongest"]
        closest = (f"; closest: {st['a']} - {st['b']} {_e(st['diff_x'])} on pass@1, {_e(st['diff_y'])} on the judge"
                   if st else "")
        return f"{len(ev['reversals'])} significant reversals in {ev['tests']} tests{closest}"
    s = ev["summary"]
    if s is None:
        return "no condition at both budgets"
    return (f"hit rate {_e(s['hit_rate'], False)} over {s['trials']} conditions; regret "
            f"{_e(s['mean_regret'], False)}")


def _rule(cid: str, c: dict) -> str:
    """Why the number gives the verdict (the decision rule of docs/findings.md, as it applied)."""
    ev, v = c["evidence"], c["verdict"]
    if cid == "a":
        return ("every rule-reward run at most 0.001 of FLOPs, every reward-model run at least 0.05" if v == "reproduced"
                else "needs runs of both kinds" if v == "inconclusive" else "a run broke a threshold")
    if cid == "b":
        return "in every matched pair the larger policy has fewer steps and rollouts" if v == "reproduced" else \
            "some matched pair does not"
    if cid == "c":
        wins = sum(r["diff_adjusted"]["low"] > 0 for r in ev["comparisons"])
        losses = sum(r["diff"]["high"] < 0 for r in ev["comparisons"])
        return {"reproduced": f"the smaller policy's Bonferroni lower bound is above 0 in {wins} of "
                              f"{len(ev['comparisons'])} conditions (the larger is better in {losses}: which wins "
                              f"depends on the metric)",
                "not reproduced": "the larger policy is significantly better in every condition"}.get(
            v, f"the smaller policy significantly better in none; the larger in {losses} of {len(ev['comparisons'])}")
    if cid == "d":
        per = ", ".join(f"{f} {x['verdict']}" for f, x in ev.items())
        return f"needs a significant reversal for each factor; per factor: {per}"
    if cid == "e":
        return {"reproduced": "a significant reversal between the metrics",
                "not reproduced": "every condition keeps one allocation clearly best under both metrics"}.get(
            v, "no significant reversal, and not every condition keeps one allocation clearly best")
    s = ev["summary"]
    if s is None:
        return "needs a pilot and a validation budget"
    fb = f"; RACE fell back to the best pilot cell in {s['fallbacks']} of {s['trials']}" if s["fallbacks"] else ""
    return {"reproduced": "the hit rate's lower bound is above chance (0.5)",
            "not reproduced": "the hit rate's upper bound is below chance (0.5)"}.get(
        v, "the hit rate's interval includes chance (0.5)") + fb


def headline(folders: Sequence[str | Path]) -> list[dict]:
    """One row per claim (a)-(f): the deciding study's verdict, the number behind it with its
    interval, the rule that applied, and every other export's verdict on it."""
    exports = [read_export(f) for f in folders]
    if not exports:
        raise RaceError("no study exports to read", "pass export folders (docs/findings docs/decisive)")
    ids = [c["id"] for c in exports[0].findings["claims"]]
    rows = []
    for cid in ids:
        designed = [e for e in exports if cid in e.designed]
        decider = max(designed or exports, key=lambda e: (e.finished, e.folder))
        c = decider.claim(cid)
        rows.append({"id": cid, "claim": c["claim"], "verdict": c["verdict"], "number": _number(cid, c),
                     "rule": _rule(cid, c), "study": decider.name, "folder": decider.folder,
                     "finished": decider.finished, "cells": decider.cells, "designed": bool(designed),
                     "others": [{"study": e.name, "folder": e.folder, "verdict": e.claim(cid)["verdict"],
                                 "designed": cid in e.designed}
                                for e in sorted(exports, key=lambda e: e.finished, reverse=True) if e is not decider]})
    return rows
