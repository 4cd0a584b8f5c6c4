"""Reward systems: a registry of TRL reward functions (sparse, structured, dense, proxy_prm, prm;
orm: any sequence-classification reward model folder).

Each system is an object TRL's GRPOTrainer accepts in `reward_funcs`:
`system(prompts, completions, **columns) -> list[float]`, where `columns` carries the dataset
columns (`answer`; `solution` and `question` where the dataset has them). Besides `__name__`
every system exposes what the ledger needs to charge it:

- `kind`: "rule" (0 FLOPs; CPU seconds still recorded) or "model" (forward passes charged);
- `model_path`: the reward model's folder (its config.json gives the FLOP spec), None for rules;
- `last_scored_lengths`: tokens the reward model ran over, per completion of the last call
  ([] for rules);
- `last_seconds`: wall seconds of the last call.

    from suite.train.rewards import get_reward_system
    reward = get_reward_system("prm")              # or "sparse", ..., model_path="/ckpt/Qwen2.5-Math-PRM-7B"
    scores = reward(prompts, completions, answer=answers)
"""

from __future__ import annotations

import time
from pathlib import Path

from ..answers import is_correct
from ..errors import RaceError
from ..registry import Registry
from . import arith

#: name -> reward system class; other packages add theirs through the `race.rewards` entry points.
REWARD_SYSTEMS: Registry[type] = Registry("reward system", group="race.rewards")


def reward_system(name: str):
    """Register a reward-system class under `name`.

    Args: `name`, the system's name (a cell's `reward:`). Returns the class decorator, which
    returns the class unchanged.
    """

    def register(cls):
        cls.system_name = name
        return REWARD_SYSTEMS.register(name)(cls)

    return register


def get_reward_system(name: str, **options):
    """A fresh instance of the named reward system; options go to its constructor
    (model_path=..., device=..., aggregate=... for the PRM systems)."""
    if name not in REWARD_SYSTEMS:
        raise RaceError(f"unknown reward system {name!r}",
                        f"known reward systems: {', '.join(sorted(REWARD_SYSTEMS))}")
    return REWARD_SYSTEMS[name](**options)


# ---------------------------------------------------------------- text


def completion_text(completion) -> str:
    """A completion as text: TRL passes strings, or message lists in conversational mode.

    Args: `completion`, a string or a list of chat messages. Returns the assistant text.
    """
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content", "") for m in completion if m.get("role", "assistant") == "assistant")


def question_text(prompt) -> str:
    """The question in a prompt: the last user turn of a message list or of chat-template text."""
    if not isinstance(prompt, str):
        return next((m["content"] for m in reversed(prompt) if m.get("role") == "user"), "")
    if "<|im_start|>user\n" in prompt:
        return prompt.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
    return prompt


def _column(kwargs: dict, name: str, n: int) -> list:
    values = kwargs.get(name)
    if values is None:
        return [None] * n
    return list(values)


# ---------------------------------------------------------------- systems


class RewardSystem:
    """Common state of a reward system; subclasses implement `score`."""

    kind = "rule"
    system_name = "?"

    def __init__(self):
        self.__name__ = self.system_name
        self.model_path: str | None = None
        self.last_scored_lengths: list[int] = []
        self.last_seconds: float = 0.0

    def __call__(self, prompts, completions, **kwargs) -> list[float]:
        t0 = time.perf_counter()
        texts = [completion_text(c) for c in completions]
        answers = _column(kwargs, "answer", len(texts))
        if any(a is None for a in answers):
            raise RaceError(f"reward system {self.system_name!r} needs an 'answer' column",
                            "the dataset must map its gold answer to a column named 'answer'")
        scores = self.score(prompts, texts, answers, kwargs)
        self.last_seconds = time.perf_counter() - t0
        return [float(s) for s in scores]

    def score(self, prompts, texts: list[str], answers: list, kwargs: dict) -> list[float]:
        raise NotImplementedError


@reward_system("sparse")
class Sparse(RewardSystem):
    """1 when the completion's final answer is correct (suite.answers.is_correct: its last
    \\boxed{} answer equals the gold answer or is equivalent to it by math-verify), else 0."""

    def score(self, prompts, texts, answers, kwargs):
        return [1.0 if is_correct(t, a) else 0.0 for t, a in zip(texts, answers)]


#: Partial credit of the structured system (sums to 1).
STRUCTURED_WEIGHTS = {"boxed_last": 0.2, "steps": 0.1, "answer": 0.7}


@reward_system("structured")
class Structured(RewardSystem):
    """Format and answer with partial credit (weights in STRUCTURED_WEIGHTS): 0.2 when the
    completion ends with its only \\boxed{} as the last step, 0.1 when at least one reasoning
    step precedes it (steps separated by a blank line), 0.7 when the answer is correct."""

    def score(self, prompts, texts, answers, kwargs):
        out = []
        for text, gold in zip(texts, answers):
            steps = arith.split_steps(text)
            boxed_last = bool(steps) and text.count("\\boxed{") == 1 and steps[-1].startswith("\\boxed{")
            w = STRUCTURED_WEIGHTS
            out.append(w["boxed_last"] * boxed_last + w["steps"] * (boxed_last and len(steps) > 1)
                       + w["answer"] * is_correct(text, gold))
        return out


def _self_consistent_labels(steps: list[str], answer) -> list[bool]:
    # Without a gold solution: a step is right when its arithmetic holds and it continues
    # from the previous step's result; the \boxed{} step when its answer is the gold one.
    labels, prev = [], None
    for text in steps:
        if text.startswith("\\boxed"):
            labels.append(is_correct(text, answer))
            continue
        s = arith.parse_step(text)
        ok = s is not None and arith.apply(s.left, s.op, s.right) == s.result and prev in (None, s.left)
        labels.append(ok)
        prev = s.result if s else None
    return labels


def dense_labels(text: str, answer, solution: str | None) -> list[bool]:
    """Rule labels of a completion's steps: against the gold solution's steps when the dataset
    has a `solution` column (suite.train.arith.step_labels), else by arithmetic self-consistency."""
    steps = arith.split_steps(text)
    if solution:
        return arith.step_labels(steps, solution, str(answer))
    return _self_consistent_labels(steps, answer)


@reward_system("dense")
class Dense(RewardSystem):
    """Share of correct steps (the final \\boxed{} step included), checked by rule; extra or
    missing steps count against it (denominator: max of completion and gold step counts)."""

    def score(self, prompts, texts, answers, kwargs):
        out = []
        for text, gold, sol in zip(texts, answers, _column(kwargs, "solution", len(texts))):
            labels = dense_labels(text, gold, sol)
            n_gold = len(arith.split_steps(sol)) if sol else 0
            out.append(sum(labels) / max(len(labels), n_gold, 1))
        return out


def default_model_path(name: str) -> Path:
    """Folder of a shipped embedded model (tasks/arith/models/<name>)."""
    from ..paths import tasks

    return tasks() / "arith" / "models" / name


#: How per-step PRM rewards become one reward per completion.
AGGREGATES = {"min": min, "last": lambda r: r[-1], "mean": lambda r: sum(r) / len(r)}


class _PRMSystem(RewardSystem):
    """Reward from a process reward model: the aggregate (min by default) of its step rewards;
    0 for a completion with no steps (nothing is scored then)."""

    kind = "model"
    default_model = "prm"

    def __init__(self, model_path: str | Path | None = None, device: str | None = None,
                 aggregate: str = "min", batch_size: int = 32):
        super().__init__()
        path = Path(model_path) if model_path else default_model_path(self.default_model)
        if not path.is_dir():
            raise RaceError(f"reward model path {path} does not exist",
                            "build the embedded models (race embedded build, from a checkout) or pass an existing PRM folder")
        if aggregate not in AGGREGATES:
            raise RaceError(f"unknown PRM aggregate {aggregate!r}", f"use one of: {', '.join(AGGREGATES)}")
        if is_sequence_classifier(path):   # refused before anything is generated, not at the first score
            raise RaceError(f"{path} is a sequence classifier (one score per sequence), not a process reward model",
                            "score with it as an outcome reward model: --native-reward orm (reward system 'orm')")
        self.model_path = str(path)
        self.device, self.aggregate, self.batch_size = device, aggregate, batch_size
        self._prm = None

    @property
    def prm(self):
        """The loaded PRM (loaded on first use; shared within the process, see _shared_prm)."""
        if self._prm is None:
            self._prm = _shared_prm(self.model_path, self.device)
        return self._prm

    def score(self, prompts, texts, answers, kwargs):
        questions = _column(kwargs, "question", len(texts))
        questions = [q if q is not None else question_text(p) for q, p in zip(questions, prompts)]
        steps = [arith.split_steps(t) for t in texts]
        todo = [i for i, s in enumerate(steps) if s]
        scored = self.prm.score([questions[i] for i in todo], [steps[i] for i in todo], self.batch_size)
        rewards, lengths = [0.0] * len(texts), [0] * len(texts)
        for i, s in zip(todo, scored):
            rewards[i] = AGGREGATES[self.aggregate](s.step_rewards) if s.step_rewards else 0.0
            lengths[i] = s.tokens
        self.last_scored_lengths = lengths
        return rewards


#: Loaded PRMs of this process, most recent last: (folder, device, weight files' stamps) -> PRM.
_PRMS: dict[tuple, object] = {}
_PRMS_KEPT = 2


def _shared_prm(path: str, device: str | None):
    """A frozen PRM loaded once per process: a grid worker scores every cell with the same judge
    and the same reward model (read-only, inference mode). Keyed by the weight files' sizes and
    mtimes, so a rebuilt model is loaded again; the two most recent stay loaded."""
    from .prm import PRM

    folder = Path(path).resolve()
    key = (str(folder), device, tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns)
                                      for f in sorted(folder.glob("*.safetensors"))))
    prm = _PRMS.pop(key, None) or PRM.load(path, device=device)
    _PRMS[key] = prm
    while len(_PRMS) > _PRMS_KEPT:
        _PRMS.pop(next(iter(_PRMS)))
    return prm


@reward_system("prm")
class ProcessReward(_PRMSystem):
    """The PRM: tasks/arith/models/prm here; any Qwen2.5-Math-PRM-style folder via model_path."""

    default_model = "prm"


@reward_system("proxy_prm")
class ProxyProcessReward(_PRMSystem):
    """A cheaper PRM standing in for the real one (tasks/arith/models/prm-proxy by default)."""

    default_model = "prm-proxy"


def is_sequence_classifier(folder: str | Path) -> bool:
    """Whether the model folder's config.json names an *ForSequenceClassification architecture."""
    from .. import jsonstrict

    cfg = Path(folder) / "config.json"
    if not cfg.is_file():
        return False
    doc = jsonstrict.read(cfg)          # a config.json with duplicate keys is refused, not guessed at
    archs = (doc.get("architectures") if isinstance(doc, dict) else None) or []
    return any(str(a).endswith("ForSequenceClassification") for a in archs)


@reward_system("orm")
class SequenceClassifierReward(RewardSystem):
    """An outcome reward model: any transformers AutoModelForSequenceClassification folder (a
    TRL reward model), scoring question + completion as one sequence; the reward is its logit
    (num_labels 1) or the last label's probability. Loaded (and checked) when constructed, so
    `race eval --native-reward orm --native-reward-model DIR` fails before it generates."""

    kind = "model"

    def __init__(self, model_path: str | Path | None = None, device: str | None = None, batch_size: int = 32):
        super().__init__()
        if model_path is None:
            raise RaceError("reward system 'orm' needs its model", "pass --native-reward-model DIR (a sequence "
                            "classifier folder), or model_path=DIR")
        path = Path(model_path)
        if not (path / "config.json").is_file():
            raise RaceError(f"reward model folder {path} has no config.json", "pass a transformers model folder")
        if not is_sequence_classifier(path):
            raise RaceError(f"{path} is not a sequence classifier (its config.json names no "
                            "*ForSequenceClassification architecture)",
                            "use --native-reward prm for a process reward model folder")
        from ..accounting.specs import spec_for

        try:   # priced (and named in reports) by its spec, of any family: checked before any scoring
            spec = spec_for(str(path))
            from ..accounting import Adapter

            spec.costs(Adapter(kind="full"), rg0=False, gc=False)  # traced: fitted now, a refused fit fails here
        except RaceError as e:
            raise RaceError(f"cannot price reward model {path} for a report: {e.message}",
                            e.hint or "check its config.json (race flops --config DIR prices it)") from None
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForSequenceClassification.from_pretrained(
                path, attn_implementation="eager").eval().to(device or "cpu")
        except (OSError, ValueError) as e:
            raise RaceError(f"cannot load the sequence classifier {path}: {str(e).splitlines()[0]}",
                            "pass a folder with the model's weights and tokenizer") from None
        self._torch = torch
        self.model_path = str(path)
        self.device, self.batch_size = device or "cpu", batch_size

    def score(self, prompts, texts, answers, kwargs):
        torch = self._torch
        questions = _column(kwargs, "question", len(texts))
        questions = [q if q is not None else question_text(p) for q, p in zip(questions, prompts)]
        rewards, lengths = [], []
        with torch.inference_mode():
            for q, t in zip(questions, texts):      # one sequence per forward: no padding is charged
                ids = self.tokenizer(q + "\n" + t, return_tensors="pt")["input_ids"].to(self.device)
                logits = self.model(input_ids=ids).logits[0].float()
                rewards.append(float(logits[0]) if logits.numel() == 1 else float(torch.softmax(logits, -1)[-1]))
                lengths.append(int(ids.shape[1]))
        self.last_scored_lengths = lengths
        return rewards
