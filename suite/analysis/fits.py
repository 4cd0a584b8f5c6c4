"""The fit models of RACE: small least-squares models of a condition's score against the update
share p (a polynomial of some degree in p or in log p, `MODELS`, a registry plugins add to with
`fit_model`), fitted with the exact leave-one-out error from the hat matrix (`fit`), and the
choice among them (`choose`: the lowest leave-one-out error, near-ties to the simpler model).
suite.analysis.race diagnoses a condition from the chosen fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..registry import Registry


@dataclass(frozen=True)
class FitModel:
    """A least-squares model of score against p: a polynomial of `degree` in p or in log p."""

    name: str
    """Stable name used in race.json."""
    log: bool
    """Fit against log p instead of p."""
    degree: int
    """Polynomial degree (0 = constant)."""

    @property
    def k(self) -> int:
        """Number of fitted coefficients."""
        return self.degree + 1

    @property
    def x(self) -> str:
        """The regressor as text."""
        return "log p" if self.log else "p"


MODELS: Registry[FitModel] = Registry("fit model")


def fit_model(name: str, log: bool, degree: int) -> FitModel:
    """Register a fit model (kept in MODELS in order of increasing complexity)."""
    return MODELS.add(name, FitModel(name, log, degree))


fit_model("constant", log=False, degree=0)
fit_model("linear", log=False, degree=1)
fit_model("log-linear", log=True, degree=1)
fit_model("quadratic", log=False, degree=2)


@dataclass(frozen=True)
class Fit:
    """One model fitted to one condition's allocations."""

    model: FitModel
    """Which model."""
    coef: tuple[float, ...]
    """Coefficients in the standardised regressor z = (x - centre) / scale, lowest power first."""
    centre: float
    """Mean of the regressor over the fitted points."""
    scale: float
    """Standard deviation of the regressor over the fitted points (1 for the constant)."""
    rmse: float
    """In-sample root mean squared error."""
    loo_rmse: float | None
    """Leave-one-out root mean squared error; None when it is undefined (too few points)."""
    cond: float
    """Condition number of the standardised design matrix."""

    def predict(self, p: np.ndarray) -> np.ndarray:
        """Fitted score at update shares p."""
        x = np.log(p) if self.model.log else np.asarray(p, dtype=float)
        z = (x - self.centre) / self.scale
        return np.polynomial.polynomial.polyval(z, np.asarray(self.coef))

    def to_dict(self) -> dict:
        """JSON form (race-v1 `fits[]`)."""
        return {"model": self.model.name, "x": self.model.x, "coef": list(self.coef),
                "centre": self.centre, "scale": self.scale, "rmse": self.rmse,
                "loo_rmse": self.loo_rmse, "cond": self.cond if math.isfinite(self.cond) else None}


def fit(model: FitModel, p: np.ndarray, y: np.ndarray) -> Fit | None:
    """Least-squares fit with the exact leave-one-out error from the hat matrix
    (e_i / (1 - h_ii)). None when the model cannot be fitted (log of p <= 0, p constant)."""
    if model.log and np.any(p <= 0):
        return None
    x = np.log(p) if model.log else p
    centre, scale = (float(x.mean()), float(x.std())) if model.degree else (0.0, 1.0)
    if model.degree and scale <= 1e-12 * max(1.0, abs(centre)):
        return None
    z = (x - centre) / scale
    X = np.vander(z, model.k, increasing=True)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    n = len(y)
    cond = float(np.linalg.cond(X))
    loo = None
    if n > model.k and math.isfinite(cond):
        q, _ = np.linalg.qr(X)
        lever = 1.0 - np.einsum("ij,ij->i", q, q)
        if np.all(lever > 1e-10):
            loo = float(math.sqrt(np.mean((resid / lever) ** 2)))
    return Fit(model=model, coef=tuple(float(c) for c in coef), centre=centre, scale=scale,
               rmse=float(math.sqrt(np.mean(resid ** 2))), loo_rmse=loo, cond=cond)


def choose(fits: list[Fit]) -> Fit | None:
    """The fit with the lowest leave-one-out error; near-ties (relative 1e-6) go to the simpler
    model, so an exactly linear surface is called linear, not quadratic."""
    ok = [f for f in fits if f.loo_rmse is not None]
    if not ok:
        return None
    lowest = min(f.loo_rmse for f in ok)
    tol = lowest * 1e-6 + 1e-12
    return min((f for f in ok if f.loo_rmse <= lowest + tol), key=lambda f: f.model.k)


__all__ = ["FitModel", "MODELS", "fit_model", "Fit", "fit", "choose"]
