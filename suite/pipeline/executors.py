"""Executors: run a list of independent cell jobs and yield their results as they finish.

The grid runner hands an executor a list of `Job`s; the executor decides where they run
(`local`: worker processes on this machine; `ray`: Ray tasks on a local or existing cluster).
Resumability is the same everywhere: a job names the file that marks it done (`Job.done`,
e.g. the cell's report.json); a job whose file exists is skipped without being started, and a
job function is idempotent (it restarts from its own checkpoint), so killing the driver and
running the same list again never runs a finished job twice.

Registry (suite.registry): name -> function(jobs, **options) -> Iterator[JobResult].
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import RaceError
from ..registry import Registry

EXECUTORS: Registry[Callable[..., Iterator["JobResult"]]] = Registry("executor")


def executor(name: str):
    """Register an executor under `name`: a function (jobs, **options) -> Iterator[JobResult]."""
    return EXECUTORS.register(name)


@dataclass(frozen=True)
class Resources:
    """What one job needs from the machine it runs on (Ray schedules by these)."""

    cpus: float = 1.0
    """CPU cores reserved for the job."""
    gpus: float = 0.0
    """GPUs reserved for the job (fractions allowed by Ray)."""


@dataclass(frozen=True)
class Job:
    """One independent unit of work: `fn(*args, **kwargs)` run somewhere.

    `fn` must be importable by name (a module-level function) so worker processes and Ray
    workers can unpickle it; its arguments must be picklable.
    """

    key: str
    """Unique name of the job within one run (e.g. the cell id)."""
    fn: Callable[..., Any]
    """The work; called as fn(*args, **kwargs); its return value is the result."""
    args: tuple = ()
    """Positional arguments for fn."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments for fn."""
    resources: Resources = Resources()
    """What the job reserves while it runs."""
    done: Path | None = None
    """File whose existence marks the job finished (e.g. its report.json): it is then skipped."""


@dataclass(frozen=True)
class JobResult:
    """What happened to one job."""

    key: str
    """The job's key."""
    status: str
    """'ok', 'failed' or 'skipped' (its `done` file already existed)."""
    value: Any = None
    """fn's return value when ok."""
    error: str | None = None
    """One-line error and the worker-side traceback when failed."""
    seconds: float = 0.0
    """Wall seconds the job ran in its worker."""

    @property
    def ok(self) -> bool:
        """True when the job ran and returned, or was already done."""
        return self.status in ("ok", "skipped")


def _call(fn, args, kwargs) -> tuple[str, Any, str | None, float]:
    """Run one job inside a worker; never raises, so one bad cell does not stop a grid."""
    t0 = time.perf_counter()
    try:
        return "ok", fn(*args, **dict(kwargs)), None, time.perf_counter() - t0
    except BaseException as e:  # noqa: BLE001 - reported to the driver, not swallowed
        msg = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
        return "failed", None, msg, time.perf_counter() - t0


def _split_done(jobs: Sequence[Job]) -> tuple[list[JobResult], list[Job]]:
    keys = [j.key for j in jobs]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise RaceError(f"duplicate job keys: {', '.join(dup)}", "give every cell a unique id")
    skipped = [JobResult(j.key, "skipped") for j in jobs if j.done is not None and Path(j.done).exists()]
    done = {r.key for r in skipped}
    return skipped, [j for j in jobs if j.key not in done]


def run_jobs(jobs: Sequence[Job], executor: str = "local", **options) -> Iterator[JobResult]:
    """Run `jobs` on the named executor; yield a JobResult per job as each finishes.

    Jobs whose `done` file exists are yielded first as 'skipped' and never started.
    Options go to the executor (local: workers; ray: address, num_cpus, num_gpus).
    """
    if executor not in EXECUTORS:
        raise RaceError(f"unknown executor {executor!r}", f"choose one of: {', '.join(sorted(EXECUTORS))}")
    skipped, pending = _split_done(jobs)
    yield from skipped
    if pending:
        yield from EXECUTORS[executor](pending, **options)


#: The most local workers `auto` starts: each is an interpreter of its own with torch and the
#: cell's models (about 0.7 GB for an embedded cell), so a many-core laptop is not filled with copies.
AUTO_WORKER_CAP = 4


def auto_workers(threads: int, jobs: int) -> int:
    """How many local workers `--workers auto` means: one per `threads` cores this process may
    use (with one torch thread a cell, the quickstart grid ran each cell as fast on two workers as
    on one), at most AUTO_WORKER_CAP and `jobs`; one when a GPU is visible, since local workers
    would all share it (Ray places cells on GPUs: --executor ray --gpus-per-cell)."""
    import torch

    if torch.cuda.is_available():
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores // max(1, threads), AUTO_WORKER_CAP, jobs))


def resolve_workers(workers: int | str, threads: int, jobs: int, executor: str = "local") -> int:
    """The number of cells run at once: `workers`, or auto_workers for "auto"; 1 for executors
    other than local (Ray places cells by their resources)."""
    if executor != "local":
        return 1
    return auto_workers(threads, jobs) if workers == "auto" else int(workers)


@executor("local")
def run_local(jobs: Sequence[Job], workers: int = 1) -> Iterator[JobResult]:
    """Worker processes on this machine (spawned, so torch state never crosses a fork).

    One worker by default. With one torch thread per job, workers up to the core count pay (the
    paper study ran two on two cores at about one worker's per-cell speed; `auto_workers` picks
    that); more oversubscribe. Resources are not enforced here; `workers` bounds concurrency.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    if workers < 1:
        raise RaceError(f"--workers must be >= 1, got {workers}")
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(_call, j.fn, j.args, j.kwargs): j for j in jobs}
        for fut in as_completed(futures):
            job = futures[fut]
            try:
                status, value, error, seconds = fut.result()
            except Exception as e:  # the worker process itself died (OOM kill, segfault)
                status, value, error, seconds = "failed", None, f"worker died: {e}", 0.0
            yield JobResult(job.key, status, value, error, seconds)


@executor("ray")
def run_ray(jobs: Sequence[Job], address: str | None = None, num_cpus: int | None = None,
            num_gpus: int | None = None) -> Iterator[JobResult]:
    """One Ray task per job, with the job's declared CPUs and GPUs.

    `address` connects to an existing cluster ('auto' or 'HOST:PORT'); without it a local Ray
    instance is started with `num_cpus`/`num_gpus` (defaults: what Ray detects) and shut down
    at the end. Needs the optional extra: pip install -c constraints.txt -e '.[ray]'.
    """
    try:
        import ray
    except ImportError:
        raise RaceError("the ray executor needs Ray, which is not installed",
                        "pip install -c constraints.txt -e '.[ray]'") from None

    started_here = not ray.is_initialized()
    if started_here:
        init: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            init["address"] = address
        else:
            # A fresh local instance; never attach to a stray cluster by accident.
            init.update(address="local", num_cpus=num_cpus, num_gpus=num_gpus)
        try:
            ray.init(**init)
        except ConnectionError as e:
            raise RaceError(f"cannot reach the Ray cluster at {address}: {e}",
                            "start it with `ray start --head` or pass the right --address; a cluster with token "
                            "authentication (Ray's default since 2.59) needs RAY_AUTH_MODE=token and its token in "
                            "RAY_AUTH_TOKEN (`ray get-auth-token` on the head)") from None
    remote_call = ray.remote(_call)
    try:
        # Starting Ray takes seconds: a straggler of a killed run may have finished meanwhile.
        skipped, jobs = _split_done(jobs)
        yield from skipped
        refs = {}
        for j in jobs:
            ref = remote_call.options(num_cpus=j.resources.cpus, num_gpus=j.resources.gpus,
                                      max_retries=0, name=f"race:{j.key}").remote(j.fn, j.args, dict(j.kwargs))
            refs[ref] = j
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                job = refs[ref]
                try:
                    status, value, error, seconds = ray.get(ref)
                except Exception as e:  # worker crashed or the task was cancelled
                    status, value, error, seconds = "failed", None, f"ray task failed: {e}", 0.0
                yield JobResult(job.key, status, value, error, seconds)
    finally:
        if started_here:
            ray.shutdown()

