"""Bootstrap statistics over problems and seeds: intervals, paired differences, the probability
that an allocation is best.

One resampling plan serves a whole study. Replicate b draws, with replacement,

- the problems of each evaluation target (one draw per target, shared by every run scored on
  it: two allocations scored on the same problems are compared on the same resampled problems,
  so their difference is *paired*), and
- the seeds of each group of runs (one draw per group — an allocation of one model, budget and
  reward system — shared by every target and metric those runs were scored with).

A run's score on one target is the mean over problems; a group's is the mean over its seeds.
Replicate b of that mean weights problem j by how often b drew it and seed i likewise, so every
statistic of the study (a mean, a difference of two means, which allocation is best, a whole
RACE replay) is computed once per replicate from the same draws, and its interval is the
percentile interval of those replicates. Draws come from numpy's PCG64 seeded by the study's
seed and the *name* of what is drawn (target or group), never by position or by Python's
salted hash: the same files give the same replicates, byte for byte, in any order.

    rs = Resampler(replicates=2000, seed=2607)
    m = rs.means(scores, target="arith-easy-250", group="policy-s|6e11|sparse|mu1")  # (B,)
    estimate(scores.mean(), m)        # Estimate(mean, low, high)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

#: Default confidence level of every interval.
LEVEL = 0.95


def generator(seed: int, *names: str) -> np.random.Generator:
    """A PCG64 generator seeded by `seed` and the names (hashed with SHA-256, so the stream of
    'arith-easy-250' is the same in every process and whatever else is drawn)."""
    words = [int(seed)]
    for name in names:
        digest = hashlib.sha256(name.encode("utf-8")).digest()
        words += [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))


def draw_counts(rng: np.random.Generator, n: int, replicates: int) -> np.ndarray:
    """(replicates, n) how often each of n items is drawn when n are drawn with replacement."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=replicates).astype(np.float64)


class Resampler:
    """The study's resampling plan: problem draws per target, seed draws per group, cached so
    every statistic that touches the same target or group sees the same draws."""

    def __init__(self, replicates: int = 2000, seed: int = 0):
        if replicates < 1:
            raise ValueError("replicates must be >= 1")
        self.replicates = int(replicates)
        self.seed = int(seed)
        self._problems: dict[tuple[str, int], np.ndarray] = {}
        self._seeds: dict[tuple[str, int], np.ndarray] = {}

    def problem_counts(self, target: str, n: int) -> np.ndarray:
        """(B, n) draw counts of the n problems of `target`."""
        key = (target, n)
        if key not in self._problems:
            self._problems[key] = draw_counts(generator(self.seed, "problems", target), n, self.replicates)
        return self._problems[key]

    def seed_counts(self, group: str, n: int) -> np.ndarray:
        """(B, n) draw counts of the n seeds of `group`."""
        key = (group, n)
        if key not in self._seeds:
            self._seeds[key] = draw_counts(generator(self.seed, "seeds", group), n, self.replicates)
        return self._seeds[key]

    def means(self, scores: np.ndarray, *, target: str, group: str) -> np.ndarray:
        """(B,) replicate means of `scores` (seeds x problems) of one group on one target."""
        x = np.asarray(scores, dtype=np.float64)
        if x.ndim != 2 or not x.size:
            raise ValueError("scores must be a non-empty (seeds, problems) array")
        s, n = x.shape
        cs, cp = self.seed_counts(group, s), self.problem_counts(target, n)
        per_seed = x @ cp.T                       # (s, B): each seed's problem-weighted sum
        return np.einsum("bs,sb->b", cs, per_seed) / (s * n)


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its percentile bootstrap interval."""

    value: float
    """The estimate on the data as observed."""
    low: float
    """Lower end of the interval."""
    high: float
    """Upper end of the interval."""
    level: float = LEVEL
    """Confidence level of the interval."""

    def excludes(self, x: float = 0.0) -> bool:
        """The interval lies strictly on one side of x."""
        return self.low > x or self.high < x

    def to_dict(self, digits: int = 4) -> dict:
        """JSON form, rounded (the last bits of a BLAS sum differ between machines)."""
        return {"value": rounded(self.value, digits), "low": rounded(self.low, digits),
                "high": rounded(self.high, digits), "level": self.level}


def rounded(x: float, digits: int = 4) -> float:
    """x rounded for a JSON document (the last bits of a BLAS sum differ between machines);
    never -0.0."""
    return float(round(float(x), digits)) + 0.0


def interval(replicates: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates at `level`."""
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(np.asarray(replicates, dtype=np.float64), [tail, 1.0 - tail])
    return float(lo), float(hi)


def estimate(value: float, replicates: np.ndarray, level: float = LEVEL) -> Estimate:
    """An Estimate of `value` with the percentile interval of its replicates."""
    lo, hi = interval(replicates, level)
    return Estimate(float(value), lo, hi, level)


def adjusted(level: float, tests: int) -> float:
    """Bonferroni: the per-test level that keeps `tests` tests at family-wise `level`."""
    return 1.0 - (1.0 - level) / max(1, tests)


def prob_best(replicates: np.ndarray) -> np.ndarray:
    """(A,) share of replicates in which each of A candidates (rows of an (A, B) array) has the
    highest value; a tie splits its replicate equally among the tied candidates. Values are
    rounded to 1e-9 first: two allocations with equal scores tie on every machine, whatever
    order its SIMD summation adds their weighted problems in."""
    m = np.round(np.asarray(replicates, dtype=np.float64), 9)
    top = m == m.max(axis=0, keepdims=True)
    return (top / top.sum(axis=0, keepdims=True)).mean(axis=1)
