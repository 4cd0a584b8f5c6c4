"""suite.analysis.stats: the seeded two-level bootstrap (problems and seeds) every study interval rests on."""

from __future__ import annotations

import numpy as np
import pytest

from suite.analysis.stats import Resampler, adjusted, draw_counts, estimate, generator, interval, prob_best


def test_draws_depend_on_the_name_not_on_the_order_of_requests():
    a, b = Resampler(200, seed=7), Resampler(200, seed=7)
    a.problem_counts("easy", 50)
    first = a.seed_counts("g1", 3).copy()
    second = b.seed_counts("g1", 3)                      # asked first here, after nothing else
    assert np.array_equal(first, second)
    assert not np.array_equal(a.problem_counts("easy", 50), a.problem_counts("hard", 50))
    assert not np.array_equal(Resampler(200, seed=8).seed_counts("g1", 3), first)


def test_counts_draw_n_items_with_replacement():
    """Each replicate draws 25 of 25 items with replacement: an item's count is Binomial(25, 1/25)
    (mean 1, variance 24/25, P(0) = 0.36), and items repeat (without replacement every count is 1)."""
    c = draw_counts(generator(0, "x"), 25, 300)
    assert c.shape == (300, 25) and np.all(c.sum(axis=1) == 25) and c.min() >= 0
    assert np.all(c.max(axis=1) >= 2)
    assert np.all(np.abs(c.mean(axis=0) - 1) < 0.25)          # each item, over 300 replicates (4 sd)
    assert abs(c.var() - 24 / 25) < 0.1 and abs((c == 0).mean() - (24 / 25) ** 25) < 0.03


def test_replicate_means_weight_problems_and_seeds_by_their_draw_counts():
    rs = Resampler(50, seed=1)
    x = np.arange(12, dtype=float).reshape(3, 4)        # 3 seeds x 4 problems
    m = rs.means(x, target="t", group="g")
    cs, cp = rs.seed_counts("g", 3), rs.problem_counts("t", 4)
    by_hand = [sum(cs[b, i] * cp[b, j] * x[i, j] for i in range(3) for j in range(4)) / 12 for b in range(50)]
    assert np.allclose(m, by_hand)
    assert np.allclose(rs.means(np.full((3, 4), 0.25), target="t", group="g"), 0.25)


def test_the_interval_matches_the_analytic_standard_error_of_a_mean():
    rng = np.random.default_rng(0)
    x = (rng.random((1, 2000)) < 0.4).astype(float)      # one seed, 2000 Bernoulli(0.4) problems
    m = Resampler(4000, seed=3).means(x, target="t", group="g")
    se = np.sqrt(x.mean() * (1 - x.mean()) / x.size)
    assert abs(m.std() / se - 1) < 0.08
    lo, hi = interval(m)
    assert lo < x.mean() < hi and abs((hi - lo) / (2 * 1.96 * se) - 1) < 0.1


def test_seed_resampling_widens_the_interval_when_seeds_disagree():
    same = np.tile((np.arange(200) % 2).astype(float), (3, 1))
    apart = same + np.array([[-0.2], [0.0], [0.2]])
    rs = Resampler(1000, seed=5)
    w_same = np.subtract(*interval(rs.means(same, target="t", group="a"))[::-1])
    w_apart = np.subtract(*interval(rs.means(apart, target="t", group="b"))[::-1])
    assert w_apart > 1.5 * w_same


def test_prob_best_splits_ties_and_sums_to_one():
    m = np.array([[1.0, 0.0, 0.5, 0.2], [0.0, 1.0, 0.5, 0.2], [0.2, 0.2, 0.1, 0.2]])
    pb = prob_best(m)
    assert np.allclose(pb, [(1 + 0.5 + 1 / 3) / 4, (1 + 0.5 + 1 / 3) / 4, (1 / 3) / 4])
    assert pb.sum() == pytest.approx(1.0)
    # equal scores summed in another order differ in the last bit: still a tie, on any machine
    a = np.array([0.1, 0.2, 0.3]).sum()          # 0.6000000000000001
    assert a != 0.6 and list(prob_best(np.array([[a], [0.6]]))) == [0.5, 0.5]


def test_estimates_and_bonferroni():
    e = estimate(0.5, np.linspace(0, 1, 1001))
    assert (e.low, e.high) == pytest.approx((0.025, 0.975)) and e.excludes(-0.1) and not e.excludes(0.5)
    assert e.to_dict() == {"value": 0.5, "low": 0.025, "high": 0.975, "level": 0.95}
    assert adjusted(0.95, 10) == pytest.approx(0.995)
    with pytest.raises(ValueError):
        Resampler(0)
