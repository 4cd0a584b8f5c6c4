"""A ledger summarised in one streaming pass (`LedgerSummary.scan`): the sums of FLOPs, tokens,
work and seconds, the first and last step and time, step-order problems, the generating steps
and their gaps (the work equations, PROV-003), with what the reader found (torn tail, bad lines,
sha256, size). Reports are built from it (suite.record.build), the validator and the
leaderboard read ledgers through it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import islice
from operator import itemgetter, lt
from pathlib import Path

from ..accounting import PHASES, TOKEN_KEYS
from ..errors import RaceError
from .ledger import LedgerReader, LineProblem, TornLine

# How many step-order problems to list one by one before summarising.
MAX_STEP_PROBLEMS = 20


@dataclass
class LedgerSummary:
    """One streaming pass over a ledger: sums of flops, tokens, work and seconds, first and
    last step and time, step-order problems, torn tail, bad lines, sha256 and size."""

    path: Path
    records: int = 0
    flops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_KEYS, 0))
    work: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    first_time: str | None = None
    last_time: str | None = None
    first_step: int | None = None
    last_step: int | None = None
    step_problems: list[tuple[int, str]] = field(default_factory=list)  # (line, message)
    n_step_problems: int = 0
    torn: TornLine | None = None
    problems: list[LineProblem] = field(default_factory=list)
    n_problems: int = 0
    sha256: str = ""
    size: int = 0
    error: str | None = None  # the file could not be opened at all
    # With scan(series=True): every record's step and its flops dict, in file order (a chart).
    series: tuple[list[int], list[dict[str, int]]] | None = None
    # Records that generated (tokens.rollout_completion > 0): how many, the step gaps between
    # consecutive ones (up to 16 distinct), the last one's step and tokens (the work equations).
    # ... and how often the most common of them (same tokens, same non-zero work) recurs (PROV-003).
    generations: int = 0
    first_gen_step: int | None = None
    gen_gaps: set = field(default_factory=set)
    last_gen_step: int | None = None
    last_gen_tokens: dict | None = None
    top_repeat: int = 0
    _repeats: dict | None = None   # signature hash -> count, during the scan only
    # Records whose rows are all equally long, as a padded engine runs them: rollout pairs =
    # n x tri(positions / n); training positions^2 / full pairs = a whole multiple of the batch.
    rollout_rows_equal: int = 0
    train_records: int = 0
    train_rows_equal: int = 0
    _batch: int = 0
    # What the update trained of the generated rows (the work equations of filtered and multi-turn
    # ledgers): kept rows (count.completions - count.discarded) and each record's prompt,
    # completion and environment tokens weighted by its kept share; completions of records
    # with environment tokens (multi-turn).
    kept_rows: int = 0
    kept_tokens: tuple = (0, 0, 0)
    env_completions: int = 0

    def _generating(self, steps: list[int], recs: list[dict]) -> None:
        counts = self._repeats
        if counts is None:
            counts = self._repeats = {}
        tok = itemgetter(*TOKEN_KEYS)
        for step, r in zip(steps, recs):
            t, w = r["tokens"], r["work"]
            if w.get("count.completions"):
                n = self._batch = w["count.completions"]
                roll = w.get("rollout.tokens", 0)
                if 2 * n * w.get("rollout.attn_causal", 0) == roll * (roll + n):
                    self.rollout_rows_equal += 1
                self._kept(w, n)
            tu, full, n = w.get("update.train.tokens", 0), w.get("update.train.attn_full", 0), self._batch
            if tu:
                self.train_records += 1
                rows, rem = divmod(tu * tu, full) if full else (0, 1)
                if not rem and n and rows % n == 0:
                    self.train_rows_equal += 1
            if t["rollout_completion"]:
                if self.last_gen_step is None:
                    self.first_gen_step = step
                elif len(self.gen_gaps) < 16:
                    self.gen_gaps.add(step - self.last_gen_step)
                self.last_gen_step, self.last_gen_tokens = step, t
                self.generations += 1
                sig = hash((tok(t), tuple(sorted(kv for kv in r["work"].items() if kv[1]))))
                c = counts[sig] = counts.get(sig, 0) + 1
                if c > self.top_repeat:
                    self.top_repeat = c

    def _kept(self, w: dict, n: int) -> None:
        d, e = w.get("count.discarded", 0), w.get("count.rollout_env", 0)
        toks = (w.get("count.rollout_prompt", 0), w.get("count.rollout_completion", 0), e)
        f = Fraction(n - d, n) if d else 1
        self.kept_rows += n - d
        self.kept_tokens = tuple(a + f * b for a, b in zip(self.kept_tokens, toks))
        if e:
            self.env_completions += n

    def _add(self, chunk: list[dict]) -> None:
        """Add a chunk of checked records to the sums, column-wise at C speed (zip + sum):
        flops and tokens have fixed keys; work and seconds are grouped by key set, which the
        records of one run share."""
        self.last_time = chunk[-1]["time"]
        for name, acc, keys in (("flops", self.flops, PHASES), ("tokens", self.tokens, TOKEN_KEYS)):
            for k, v in zip(keys, map(sum, zip(*map(itemgetter(*keys), map(itemgetter(name), chunk))))):
                acc[k] += v
        for name, acc in (("work", self.work), ("seconds", self.seconds)):
            ds = [r[name] for r in chunk if name in r]
            kinds = set(map(tuple, ds))
            groups: dict[tuple, list] = {}
            if len(kinds) == 1:         # the usual case: one key set for the whole chunk
                groups[kinds.pop()] = ds
            else:
                for d in ds:
                    groups.setdefault(tuple(d), []).append(d)
            for keys, ds in groups.items():
                if not keys:
                    continue
                rows = map(itemgetter(*keys), ds) if len(keys) > 1 else ((d[keys[0]],) for d in ds)
                for k, v in zip(keys, map(sum, zip(*rows))):
                    acc[k] = acc.get(k, 0) + v

    @classmethod
    def scan(cls, path: str | os.PathLike, *, strict: bool = False, series: bool = False) -> "LedgerSummary":
        """Stream the ledger once and summarise it (constant memory). strict: a bad middle
        line or a step that does not increase raises RaceError instead of being collected.
        series: also keep every record's step and flops (memory grows with the ledger)."""
        s = cls(Path(path))
        if series:
            s.series = ([], [])
        if not s.path.is_file():
            s.error = f"ledger file {s.path} does not exist" if not s.path.exists() else f"{s.path} is not a file"
            return s
        reader = LedgerReader(s.path, strict=strict)
        prev = None
        try:
            for linenos, recs in reader.batches():
                steps = list(map(itemgetter("step"), recs))
                seq = steps if prev is None else [prev, *steps]
                if not all(map(lt, seq, islice(seq, 1, None))):    # look closer only when out of order
                    for line, step in zip(linenos, steps):
                        if prev is not None and step <= prev:
                            if strict:
                                raise RaceError(f"{s.path}: line {line}: step {step} does not follow step {prev}",
                                                "steps must strictly increase; one record per optimizer step")
                            s.n_step_problems += 1
                            if len(s.step_problems) < MAX_STEP_PROBLEMS:
                                what = "repeats" if step == prev else "goes back from"
                                s.step_problems.append((line, f"step {step} {what} step {prev}"))
                        prev = step
                prev = steps[-1]
                if series:
                    s.series[0].extend(steps)
                    s.series[1].extend(map(itemgetter("flops"), recs))
                if s.first_step is None:
                    s.first_step, s.first_time = steps[0], recs[0]["time"]
                s._add(recs)
                s._generating(steps, recs)
        except OSError as e:
            s.error = f"cannot read ledger {s.path}: {e}"
            return s
        s.last_step = prev
        s._repeats = None                  # a summary is kept per ledger in a site build: keep it small
        s.records = reader.records
        s.torn, s.problems, s.n_problems = reader.torn, reader.problems, reader.n_problems
        s.sha256, s.size = reader.sha256, reader.size
        return s


__all__ = ["LedgerSummary", "MAX_STEP_PROBLEMS"]
