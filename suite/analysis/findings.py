"""The findings of a study: every allocation's scores with bootstrap intervals, the best allocation
of every condition with the probability that it is best, paired differences, RACE validated on a
held-out budget (suite.analysis.holdout), and the source paper's claims (a)-(f), each judged
reproduced / not reproduced / inconclusive at the 95% level with the numbers behind the verdict.

Everything is computed from the runs on disk (suite.analysis.evidence: reports and per-sample
logs) with one seeded resampling plan (suite.analysis.stats), so the same files give the same
findings.json byte for byte. This module is the science and the document (findings.json,
`schemas/findings-v1.schema.json`); suite.site.findings presents it (Markdown, HTML, figures)
reading only the document. docs/findings.md states every decision rule.

    from suite.analysis import evidence, findings
    doc = findings.findings(findings.analyse(evidence.load_runs("runs/study")))
    print(findings.to_json(doc))
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from ..errors import RaceError
from ..record import schemas
from ..registry import Registry
from .evidence import Run
from .frontier import Allocation, Condition, best
from .stats import LEVEL, Estimate, Resampler, adjusted, estimate, prob_best, rounded

FORMAT = "race-findings"
VERSION = 1
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
#: The metrics allocations are judged by (the native reward is each reward system's own scale).
SCORE_METRICS = ("pass@1", "process_judge")
#: Largest reward FLOP share a rule reward may show and still spend "~0" reward FLOPs.
RULE_MAX_SHARE = 1e-3
#: Smallest reward FLOP share every model-reward run must show to call it "visible".
VISIBLE_SHARE = 0.05
#: Probability of being best above which the same allocation counts as clearly best.
CLEAR_BEST = 0.95


@dataclass(frozen=True)
class Settings:
    """How the findings are computed (recorded in findings.json)."""

    replicates: int = 2000
    """Bootstrap replicates of every statistic."""
    seed: int = 2607
    """Seed of the resampling plan (suite.analysis.stats)."""
    level: float = LEVEL
    """Confidence level of every interval and verdict."""
    race_replicates: int = 500
    """Replicates of the RACE replay (the first ones of the plan: a replay runs RACE's fits)."""
    pilot: int | None = None
    """Pilot budget (band upper end); None: the smallest budget of the runs."""
    validation: int | None = None
    """Held-out validation budget; None: the largest budget of the runs."""

    def to_dict(self) -> dict:
        """JSON form."""
        return {"replicates": self.replicates, "seed": self.seed, "level": self.level,
                "race_replicates": self.race_replicates, "pilot": self.pilot, "validation": self.validation}


@dataclass(frozen=True)
class Point:
    """One allocation of one condition, its seeds pooled, with its bootstrap replicates."""

    label: str
    """Allocation label."""
    lora_rank: int
    """LoRA rank."""
    group_size: int
    """K."""
    num_iterations: int
    """Optimizer steps per generation batch."""
    p: float
    """Mean update share over seeds."""
    reward_share: float
    """Mean reward FLOP share over seeds."""
    total_flops: float
    """Mean training FLOPs over seeds."""
    steps: float
    """Mean optimizer steps over seeds."""
    completions: float
    """Mean rollouts over seeds."""
    n: int
    """Seeds."""
    score: float
    """Mean score over seeds and problems."""
    replicates: np.ndarray = field(repr=False, compare=False)
    """(B,) bootstrap replicates of the mean score."""
    runs: tuple[str, ...] = ()
    """The run folders pooled."""
    phase_flops: Mapping[str, float] = field(default_factory=dict, compare=False)
    """Mean training FLOPs per phase over seeds (rollout, update, reward; suite.analysis.surface)."""

    def allocation(self) -> Allocation:
        """suite.analysis.frontier's Allocation (observed score)."""
        return Allocation(label=self.label, lora_rank=self.lora_rank, p=self.p, score=self.score,
                          score_sd=0.0, reward_share=self.reward_share, total_flops=self.total_flops, n=self.n)


@dataclass(frozen=True)
class Analysis:
    """A study's runs, pooled into allocations per condition, with the resampling plan."""

    runs: tuple[Run, ...]
    """Every evaluated run."""
    settings: Settings
    """Settings (pilot and validation budgets filled in)."""
    points: Mapping[Condition, tuple[Point, ...]]
    """Condition -> its allocations, sorted by p."""
    targets: Mapping[str, int]
    """Evaluation target -> problems scored."""
    holdout: Mapping | None = None
    """RACE validated on the held-out budget (suite.analysis.holdout.validate), once `with_holdout` ran."""


# ---------------------------------------------------------------- pooling


def analyse(runs: Sequence[Run], settings: Settings = Settings()) -> Analysis:
    """Pool each group of runs (same model, band, reward system, allocation; seeds differ) into
    one Point per evaluation, with replicates from one resampling plan."""
    if not runs:
        raise RaceError("no evaluated runs to analyse", "run the study first (race study STUDY.yaml --out DIR)")
    budgets = sorted({r.budget for r in runs})
    settings = replace(settings, pilot=settings.pilot or budgets[0], validation=settings.validation or budgets[-1])
    rs = Resampler(settings.replicates, settings.seed)
    groups: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        groups[r.group].append(r)
    points: dict[Condition, list[Point]] = defaultdict(list)
    targets: dict[str, int] = {}
    for name in sorted(groups):
        members = sorted(groups[name], key=lambda r: (r.seed, r.path))
        seeds = [r.seed for r in members]
        if len(set(seeds)) != len(seeds):
            raise RaceError(f"runs {', '.join(r.path for r in members)} share allocation, budget and seed",
                            "a study folder holds each cell once; remove the copy")
        keys = set(members[0].scores)
        for r in members[1:]:
            if set(r.scores) != keys:
                raise RaceError(f"{r.path} was evaluated on other targets or metrics than {members[0].path}",
                                "evaluate every seed of an allocation the same way")
        first = members[0]
        for target, metric in sorted(keys):
            x = np.stack([r.scores[target, metric] for r in members])
            targets[target] = x.shape[1]
            mean = lambda f: float(np.mean([f(r) for r in members]))  # noqa: E731
            points[first.condition(target, metric)].append(Point(
                label=first.label, lora_rank=first.lora_rank, group_size=first.group_size,
                num_iterations=first.num_iterations, p=mean(lambda r: r.p), reward_share=mean(lambda r: r.reward_share),
                total_flops=mean(lambda r: r.flops), steps=mean(lambda r: r.steps),
                completions=mean(lambda r: r.completions), n=len(members), score=float(x.mean()),
                replicates=rs.means(x, target=target, group=name), runs=tuple(r.path for r in members),
                phase_flops={k: mean(lambda r, k=k: r.phase_flops.get(k, 0)) for k in ("rollout", "update", "reward")}))
    ordered = {c: tuple(sorted(points[c], key=lambda x: (x.p, x.label, x.lora_rank))) for c in sorted(points)}
    return Analysis(tuple(runs), settings, ordered, dict(sorted(targets.items())))


# ---------------------------------------------------------------- per condition


def best_point(points: Sequence[Point]) -> Point:
    """The best observed allocation (suite.analysis.frontier.best: ties to the smaller p, then the label)."""
    top = best([x.allocation() for x in points])
    return next(x for x in points if (x.label, x.lora_rank) == (top.label, top.lora_rank))


def difference(a: Point, b: Point, level: float) -> Estimate:
    """a - b on the same problems (paired through the shared problem draws), seeds independent."""
    return estimate(a.score - b.score, a.replicates - b.replicates, level)


def condition_summary(cond: Condition, points: Sequence[Point], level: float) -> dict:
    """One condition: each allocation with its interval and probability of being best; the best
    allocation; every paired difference."""
    pb = prob_best(np.stack([x.replicates for x in points]))
    top = best_point(points)
    return {
        "name": cond.name(), "condition": cond.to_dict(), "best": top.label,
        "prob_best": rounded(pb[points.index(top)]),
        "allocations": [{"label": x.label, "lora_rank": x.lora_rank, "group_size": x.group_size,
                         "num_iterations": x.num_iterations, "p": rounded(x.p),
                         "reward_share": rounded(x.reward_share), "steps": rounded(x.steps, 1),
                         "completions": rounded(x.completions, 1), "seeds": x.n,
                         "score": estimate(x.score, x.replicates, level).to_dict(), "prob_best": rounded(pb[i])}
                        for i, x in enumerate(points)],
        "differences": [{"a": a.label, "b": b.label, "diff": difference(a, b, level).to_dict()}
                        for a, b in itertools.combinations(points, 2)],
    }


# ---------------------------------------------------------------- claims

@dataclass(frozen=True)
class Claim:
    """One of the source paper's claims and the function that judges it on a study."""

    id: str
    """Its letter, (a)-(f)."""
    text: str
    """The claim as the paper states it."""
    judge: Callable[[Analysis], dict]
    """Analysis -> {verdict, summary, evidence, runs}."""


#: Claim id -> Claim, in the order they are reported.
CLAIMS: Registry[Claim] = Registry("claim")


def claim(cid: str, text: str):
    """Register the judge of claim `cid`: a function (Analysis) -> {verdict, summary, evidence, runs}."""
    return CLAIMS.register(cid, lambda fn: Claim(cid, text, fn))


def _verdict(verdict: str, summary: str, evidence, runs: int) -> dict:
    return {"verdict": verdict, "summary": summary, "evidence": evidence, "runs": runs}


@claim("a", "Rule rewards spend ~0 reward FLOPs; the PRM spends a visible share of the budget.")
def claim_a(an: Analysis) -> dict:
    rule = [r for r in an.runs if r.reward_kind == "rule"]
    model = [r for r in an.runs if r.reward_kind != "rule"]   # orm, prm, judge: a model scores
    ev = {"rule_max_share": rounded(max((r.reward_share for r in rule), default=0.0), 6),
          "rule_runs": len(rule), "model_runs": len(model), "thresholds": {"rule_max": RULE_MAX_SHARE,
                                                                        "visible": VISIBLE_SHARE},
          "by_reward": []}
    by: dict[tuple, list[float]] = defaultdict(list)
    for r in model + rule:
        by[r.params, r.model, r.reward].append(r.reward_share)
    for (_, m, rw), xs in sorted(by.items()):
        ev["by_reward"].append({"model": m, "reward": rw, "runs": len(xs), "mean": rounded(float(np.mean(xs))),
                                "min": rounded(min(xs)), "max": rounded(max(xs))})
    if not rule or not model:
        return _verdict(INCONCLUSIVE, "the study needs runs of a rule reward and of a reward model", ev, len(an.runs))
    lo = min(r.reward_share for r in model)
    ok = ev["rule_max_share"] <= RULE_MAX_SHARE and lo >= VISIBLE_SHARE
    summary = (f"rule rewards: reward FLOP share at most {ev['rule_max_share']:.4f} over {len(rule)} runs; "
               f"reward models: {lo:.3f}-{max(r.reward_share for r in model):.3f} over {len(model)} runs "
               f"(exact counts from the ledgers, no sampling error)")
    return _verdict(REPRODUCED if ok else NOT_REPRODUCED, summary, ev, len(an.runs))


@claim("b", "At equal FLOPs the larger policy buys fewer updates and fewer rollouts.")
def claim_b(an: Analysis) -> dict:
    cells: dict[tuple, dict[int, Run]] = defaultdict(dict)
    for r in an.runs:
        cells[r.band, r.reward, r.label, r.lora_rank, r.seed][r.params] = r
    pairs = []
    for key, by_size in sorted(cells.items()):
        sizes = sorted(by_size)
        for small, large in itertools.combinations(sizes, 2):
            s, l_ = by_size[small], by_size[large]
            pairs.append({"budget": key[0][1], "reward": key[1], "allocation": key[2], "seed": key[4],
                          "small": s.model, "large": l_.model, "steps": [s.steps, l_.steps],
                          "completions": [s.completions, l_.completions]})
    if not pairs:
        return _verdict(INCONCLUSIVE, "the study needs two model sizes at the same budget and allocation", [], 0)
    step_ratio = [p["steps"][1] / p["steps"][0] for p in pairs]
    roll_ratio = [p["completions"][1] / p["completions"][0] for p in pairs]
    ok = max(step_ratio) < 1 and max(roll_ratio) < 1
    summary = (f"larger / smaller policy over {len(pairs)} matched runs (same budget, reward, allocation, seed): "
               f"optimizer steps x{np.mean(step_ratio):.2f} (range {min(step_ratio):.2f}-{max(step_ratio):.2f}), "
               f"rollouts x{np.mean(roll_ratio):.2f} (range {min(roll_ratio):.2f}-{max(roll_ratio):.2f})")
    ev = {"pairs": len(pairs), "step_ratio": {"mean": rounded(np.mean(step_ratio)), "min": rounded(min(step_ratio)),
                                              "max": rounded(max(step_ratio))},
          "rollout_ratio": {"mean": rounded(np.mean(roll_ratio)), "min": rounded(min(roll_ratio)),
                            "max": rounded(max(roll_ratio))},
          "matched": pairs}
    return _verdict(REPRODUCED if ok else NOT_REPRODUCED, summary, ev, 2 * len(pairs))


def _others(c: Condition, *drop: str) -> tuple:
    """The condition's coordinates without the named factors (model, budget, reward, target, metric)."""
    full = {"model": (c.params_total, c.model), "budget": (c.band_low, c.band_high), "reward": (c.reward_system,),
            "target": (c.target,), "metric": (c.metric, c.judge)}
    return tuple(v for k, v in full.items() if k not in drop)


@claim("c", "A smaller policy trained longer can beat a larger one at equal FLOPs.")
def claim_c(an: Analysis) -> dict:
    lines: dict[tuple, list[Condition]] = defaultdict(list)
    for c in an.points:
        if c.metric in SCORE_METRICS:
            lines[_others(c, "model")].append(c)
    comps = []
    for key, conds in sorted(lines.items()):
        for cs, cl in itertools.combinations(sorted(conds), 2):
            ps, pl = an.points[cs], an.points[cl]
            obs = max(x.score for x in ps) - max(x.score for x in pl)
            reps = np.max(np.stack([x.replicates for x in ps]), 0) - np.max(np.stack([x.replicates for x in pl]), 0)
            comps.append((cs, cl, obs, reps, best_point(ps), best_point(pl)))
    if not comps:
        return _verdict(INCONCLUSIVE, "the study needs two model sizes in one condition", [], 0)
    lvl = adjusted(an.settings.level, len(comps))
    rows, wins, losses = [], 0, 0
    for cs, cl, obs, reps, bs, bl in comps:
        adj, raw = estimate(obs, reps, lvl), estimate(obs, reps, an.settings.level)
        wins += adj.low > 0
        losses += raw.high < 0
        rows.append({"condition": cs.name().replace(cs.model, f"{cs.model} vs {cl.model}", 1),
                     "small": cs.model, "large": cl.model, "small_best": bs.label, "large_best": bl.label,
                     "small_steps": rounded(bs.steps, 1), "large_steps": rounded(bl.steps, 1),
                     "diff": raw.to_dict(), "diff_adjusted": adj.to_dict()})
    top = max(rows, key=lambda r: r["diff_adjusted"]["low"])
    verdict = REPRODUCED if wins else NOT_REPRODUCED if losses == len(comps) else INCONCLUSIVE
    summary = (f"best allocation of the smaller minus the larger policy in {len(comps)} conditions: the smaller "
               f"better in {wins} (Bonferroni over the {len(comps)}), the larger better in {losses} (95% each); "
               f"strongest for the smaller: {top['condition']}: {_est(top['diff'])}, Bonferroni "
               f"{_est(top['diff_adjusted'])}")
    return _verdict(verdict, summary, {"comparisons": rows, "level_adjusted": rounded(lvl, 6)},
                    len({p for c in comps for x in (*an.points[c[0]], *an.points[c[1]]) for p in x.runs}))


def _est(e: dict) -> str:
    return f"{e['value']:+.3f} [{e['low']:+.3f}, {e['high']:+.3f}]"


def _reversals(an: Analysis, pairs: Sequence[tuple[Condition, Condition]]) -> dict:
    """Significant rank reversals between two conditions: allocations a, b with a - b > 0 in one
    and < 0 in the other, both intervals excluding 0 at the Bonferroni level over every (pair of
    conditions, pair of allocations) tested; and whether every pair clearly keeps one best."""
    tests = []
    for cx, cy in pairs:
        px = {x.label: x for x in an.points[cx]}
        py = {x.label: x for x in an.points[cy]}
        common = sorted(set(px) & set(py))
        for a, b in itertools.combinations(common, 2):
            tests.append((cx, cy, a, b, px, py))
    if not tests:
        return {"tests": 0, "pairs": 0, "reversals": [], "strongest": None, "same_best": False}
    lvl = adjusted(an.settings.level, len(tests))
    found, strongest = [], None
    for cx, cy, a, b, px, py in tests:
        dx, dy = difference(px[a], px[b], lvl), difference(py[a], py[b], lvl)
        rec = {"x": cx.name(), "y": cy.name(), "a": a, "b": b, "diff_x": dx.to_dict(), "diff_y": dy.to_dict()}
        # margin: how far the weaker of the two opposite-signed effects is from 0, in interval units
        sx = np.std(px[a].replicates - px[b].replicates) or math.inf
        sy = np.std(py[a].replicates - py[b].replicates) or math.inf
        margin = min(dx.value / sx, -dy.value / sy) if dx.value >= 0 else min(-dx.value / sx, dy.value / sy)
        if (dx.low > 0 and dy.high < 0) or (dx.high < 0 and dy.low > 0):
            found.append(rec)
        if strongest is None or margin > strongest[0]:
            strongest = (margin, rec)
    same = all(_clear_best(an.points[cx]) == _clear_best(an.points[cy]) is not None for cx, cy in pairs)
    return {"tests": len(tests), "pairs": len(pairs), "level_adjusted": rounded(lvl, 6), "reversals": found,
            "strongest": {**strongest[1], "margin_sd": rounded(strongest[0], 3)}, "same_best": same}


def _clear_best(points: Sequence[Point]) -> str | None:
    """The allocation best in at least CLEAR_BEST of the replicates, if any."""
    pb = prob_best(np.stack([x.replicates for x in points]))
    i = int(np.argmax(pb))
    return points[i].label if pb[i] >= CLEAR_BEST else None


def _reversal_verdict(r: dict) -> str:
    if not r["tests"]:
        return INCONCLUSIVE
    return REPRODUCED if r["reversals"] else NOT_REPRODUCED if r["same_best"] else INCONCLUSIVE


FACTORS = ("model", "budget", "reward", "target")


@claim("d", "The best allocation moves with model size, budget, reward system and evaluation target.")
def claim_d(an: Analysis) -> dict:
    per = {}
    for factor in FACTORS:
        lines: dict[tuple, list[Condition]] = defaultdict(list)
        for c in an.points:
            if c.metric in SCORE_METRICS:
                lines[_others(c, factor)].append(c)
        pairs = [pair for _, cs in sorted(lines.items()) for pair in itertools.combinations(sorted(cs), 2)]
        r = _reversals(an, pairs)
        per[factor] = {**r, "verdict": _reversal_verdict(r)}
    verdicts = [v["verdict"] for v in per.values()]
    verdict = (REPRODUCED if all(v == REPRODUCED for v in verdicts) else
               NOT_REPRODUCED if NOT_REPRODUCED in verdicts else INCONCLUSIVE)
    summary = "Bonferroni intervals. " + " ".join(
        f"{f.upper()}: {v['verdict']} ({len(v['reversals'])} significant reversal(s) in {v['tests']} tests"
        + (f"; closest to one: {v['strongest']['a']} - {v['strongest']['b']} {_est(v['strongest']['diff_x'])} "
           f"then {_est(v['strongest']['diff_y'])}" if v["strongest"] else "") + ")"
        for f, v in per.items())
    return _verdict(verdict, summary, per, len(an.runs))


@claim("e", "pass@1 and the process judge can prefer different allocations.")
def claim_e(an: Analysis) -> dict:
    pairs = []
    for c in an.points:
        if c.metric == "pass@1":
            twin = next((d for d in an.points if d.metric == "process_judge" and
                         _others(d, "metric") == _others(c, "metric")), None)
            if twin is not None:
                pairs.append((c, twin))
    r = _reversals(an, pairs)
    verdict = _reversal_verdict(r)
    disagree = sum(best_point(an.points[a]).label != best_point(an.points[b]).label for a, b in pairs)
    summary = (f"{len(r['reversals'])} significant reversal(s) in {r['tests']} tests over {len(pairs)} conditions "
               f"(Bonferroni intervals); "
               f"the observed best allocation differs between the two metrics in {disagree} of {len(pairs)}"
               + (f"; closest to a reversal: {r['strongest']['a']} - {r['strongest']['b']} on pass@1 "
                  f"{_est(r['strongest']['diff_x'])}, on the judge {_est(r['strongest']['diff_y'])} in "
                  f"{r['strongest']['x'].rsplit('/', 1)[0]}" if r["strongest"] else ""))
    return _verdict(verdict, summary, {**r, "observed_disagreements": disagree}, len(an.runs))


@claim("f", "RACE's regime calls hold on held-out validation runs (paper: same-regime hit rate 1.0), "
            "with a non-zero regret and no guaranteed gain over a global native-reward baseline.")
def claim_f(an: Analysis) -> dict:
    from .holdout import CHANCE

    h = with_holdout(an).holdout
    s = h["summary"]
    if s is None:
        return _verdict(INCONCLUSIVE, "no condition has 3 common allocations at the pilot budget and at a larger "
                                      "validation budget", h, 0)
    hit, reg = s["hit_rate"], s["mean_regret"]
    verdict = REPRODUCED if hit["low"] > CHANCE else NOT_REPRODUCED if hit["high"] < CHANCE else INCONCLUSIVE
    summary = (f"pilot {h['settings']['pilot_budget']:.3g} -> validation {h['settings']['validation_budget']:.3g} "
               f"FLOPs, {s['trials']} conditions: same-regime hit rate {hit['value']:.2f} [{hit['low']:.2f}, "
               f"{hit['high']:.2f}] ({s['hits']}/{s['trials']} observed; chance {CHANCE}); "
               f"regret of RACE's pick {_est(reg)}")
    if s["baseline_mean_regret"]:
        summary += (f"; global native-reward baseline's regret {_est(s['baseline_mean_regret'])}, RACE minus baseline "
                    f"{_est(s['race_minus_baseline'])}")
    curves = s["predictors"]["curves"]
    if curves:
        summary += (f"; the pilot curves extrapolated to the validation compute pick its best allocation in "
                    f"{_est(curves['pick_hit_rate'])} of conditions (RACE {_est(s['predictors']['race']['pick_hit_rate'])}) "
                    f"with regret {_est(curves['mean_regret'])}")
    return _verdict(verdict, summary, h, s["runs"])


def with_holdout(an: Analysis, surface: bool = False) -> Analysis:
    """The analysis with RACE validated on its held-out budget (suite.analysis.holdout): the replay runs
    RACE's fits once per replicate, so it is computed once and kept. `surface`: with the pilot
    surface's predictor too (suite.analysis.surface; `race curves --surface`)."""
    from .curves import series
    from .holdout import validate

    if an.holdout is not None and (not surface or "surface" in (an.holdout["summary"] or {}).get("predictors", {})):
        return an
    pilot = [r for r in an.runs if r.budget == an.settings.pilot]
    curves = series(pilot) if any(r.curve for r in pilot) else None     # the curve predictor, where runs have curves
    return replace(an, holdout=validate(an.points, an.settings.pilot, an.settings.validation,
                                        replicates=min(an.settings.race_replicates, an.settings.replicates),
                                        level=an.settings.level, curves=curves,
                                        resampler=Resampler(an.settings.replicates, an.settings.seed), surface=surface))


# ---------------------------------------------------------------- the document


def findings(an: Analysis, source: Mapping | None = None) -> dict:
    """The findings document (findings.json): settings, source, every claim with its verdict,
    every condition's allocations with intervals, and RACE's held-out validation."""
    an = with_holdout(an)
    claims = []
    for c in CLAIMS.values():
        claims.append({"id": c.id, "claim": c.text, **c.judge(an)})
    runs = an.runs
    return {
        "format": FORMAT, "version": VERSION,
        "source": {**dict(source or {}), "runs": len(runs), "targets": dict(an.targets),
                   "models": [m for _, m in sorted({(r.params, r.model) for r in runs})],
                   "budgets": sorted({r.budget for r in runs}), "rewards": sorted({r.reward for r in runs}),
                   "allocations": sorted({r.label for r in runs}), "seeds": sorted({r.seed for r in runs})},
        "settings": an.settings.to_dict(),
        "claims": claims,
        "race_holdout": an.holdout,
        "conditions": [condition_summary(c, pts, an.settings.level) for c, pts in an.points.items()],
    }


def check(doc: dict) -> None:
    """Validate a findings document against schemas/findings-v1 (Draft 2020-12); a failure is a
    bug in the findings, reported with the JSON path."""
    schemas.check_output(doc, schemas.FINDINGS, "findings.json",
                         "this is a bug in the findings; please report it with the study folder")


def to_json(doc: dict) -> str:
    """findings.json as text (what `race findings --check` compares byte for byte)."""
    import json

    return json.dumps(doc, indent=1, allow_nan=False) + "\n"
