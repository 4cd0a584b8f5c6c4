"""verl launch for a cell: the `python3 -m verl.trainer.main_ppo` command with Hydra overrides.

`launch_overrides(cell)` maps a CellSpec onto verl 0.9's config (GRPO advantages, group size,
batch sizes, LoRA, vLLM rollout, response length, the suite's reward function, the file
logger); `compose(overrides)` checks them against verl's own packaged config with Hydra's
compose API -- nothing of verl is imported or launched -- and returns the composed config.
`race import verl` reads the file logger's JSON Lines back (suite.integrations.importers).

verl's own dependencies (transformers<5.11, torch 2.11) clash with the suite's pins, so only its
config files are used here: pip install -c constraints.txt -e '.[verl]' &&
pip install --no-deps -c constraints.txt verl==0.9.1
"""

from __future__ import annotations

import importlib.util
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..atomic import atomic_path
from ..errors import RaceError

if TYPE_CHECKING:
    from ..train.cell import CellSpec

ENGINE = "verl"
"""The engine this module exports cells to (`race export ENGINE CELL`; tasks/engines/verl.yaml)."""
ENTRY = "python3 -m verl.trainer.main_ppo"
"""The command the export launches."""

VERL_VERSION = "0.9.1"
"""The verl release whose config and metric names this module follows."""

CONFIG_NAME = "ppo_trainer"
"""verl's top-level trainer config (verl/trainer/config/ppo_trainer.yaml)."""

INSTALL_HINT = ("pip install -c constraints.txt -e '.[verl]' && "
                f"pip install --no-deps -c constraints.txt verl=={VERL_VERSION}")

RULE_REWARDS = ("sparse", "structured", "dense")
"""Reward systems verl runs through suite/integrations/verl_reward.py (rule rewards, 0 FLOPs)."""

REWARD_MODULE = Path(__file__).with_name("verl_reward.py")
"""The custom reward function file verl loads (custom_reward_function.path)."""


@dataclass(frozen=True)
class Cluster:
    """Where verl runs: GPUs per node, nodes, and the rollout's tensor parallelism."""

    n_gpus_per_node: int = 8
    """GPUs on each node (trainer.n_gpus_per_node)."""
    nnodes: int = 1
    """Nodes (trainer.nnodes)."""
    rollout_tp: int = 1
    """vLLM tensor-parallel size (a 1.5B-7B policy fits one GPU)."""
    gpu_memory_utilization: float = 0.6
    """Share of GPU memory vLLM may take (the FSDP actor shares the GPU)."""

    @property
    def world_size(self) -> int:
        """All GPUs."""
        return self.n_gpus_per_node * self.nnodes


def _list(items: Sequence[str]) -> str:
    return "[" + ",".join(items) + "]"


def launch_overrides(cell: "CellSpec", *, model_path: str | None = None, train_files: str | None = None,
                     val_files: str | None = None, cluster: Cluster = Cluster(),
                     max_prompt_length: int = 1024, total_epochs: int = 1) -> list[str]:
    """Hydra overrides (key=value strings) that make verl's main_ppo run `cell` as GRPO.

    model_path: the policy folder or hub id (default: the cell's policy); train_files /
    val_files: verl-format parquet (default: the cell's dataset with a .parquet suffix).
    One optimizer step per generation batch and epoch (ppo_mini_batch_size = prompts per step),
    ppo_epochs = mu, so a verl step is one GRPO step of the cell.
    """
    world = cluster.world_size
    if world < 1 or cluster.rollout_tp < 1 or world % cluster.rollout_tp:
        raise RaceError(f"rollout tensor parallel size {cluster.rollout_tp} must divide the {world} GPUs")
    seqs = cell.prompts_per_step * cell.group_size
    if seqs % world:
        raise RaceError(f"cell {cell.name}: {seqs} sequences per step (prompts_per_step x K) do not split "
                        f"over {world} GPUs", "pick --gpus-per-node/--nodes that divide prompts_per_step x K")
    micro = max(1, min(cell.micro_batch, seqs) // world)
    data = train_files or str(Path(cell.dataset).with_suffix(".parquet"))
    o = {
        "algorithm.adv_estimator": "grpo",
        "algorithm.use_kl_in_reward": "False",
        "data.train_files": data,
        "data.val_files": val_files or data,
        "data.train_batch_size": cell.prompts_per_step,
        "data.max_prompt_length": max_prompt_length,
        "data.max_response_length": cell.max_completion_tokens,
        "data.filter_overlong_prompts": "True",
        "data.seed": cell.seed,
        "actor_rollout_ref.model.path": model_path or cell.policy,
        "actor_rollout_ref.model.use_remove_padding": "True",
        "actor_rollout_ref.model.enable_gradient_checkpointing": str(cell.gradient_checkpointing),
        "actor_rollout_ref.actor.optim.lr": cell.learning_rate,
        "actor_rollout_ref.actor.ppo_mini_batch_size": cell.prompts_per_step,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.actor.ppo_epochs": cell.num_iterations,
        "actor_rollout_ref.actor.use_kl_loss": str(cell.beta > 0),
        "actor_rollout_ref.actor.kl_loss_coef": cell.beta,
        "actor_rollout_ref.actor.entropy_coeff": 0,
        "actor_rollout_ref.rollout.name": "vllm",
        # the accounting's verl profile shares a prompt's prefill among its K completions (verl's default)
        "actor_rollout_ref.rollout.enable_prefix_caching": "True",
        "actor_rollout_ref.rollout.n": cell.group_size,
        "actor_rollout_ref.rollout.temperature": cell.temperature,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": cluster.rollout_tp,
        "actor_rollout_ref.rollout.gpu_memory_utilization": cluster.gpu_memory_utilization,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": micro,
        "trainer.logger": _list(["console", "file"]),
        "trainer.project_name": "race",
        "trainer.experiment_name": cell.name,
        "trainer.n_gpus_per_node": cluster.n_gpus_per_node,
        "trainer.nnodes": cluster.nnodes,
        "trainer.total_epochs": total_epochs,
        "trainer.val_before_train": "False",
        "trainer.test_freq": -1,
    }
    if cell.lora_rank:
        params = [t for t in cell.lora_targets if "." in t]
        if params:
            raise RaceError(f"cell {cell.name}: LoRA targets {', '.join(params)} are peft target_parameters, which "
                            f"verl {VERL_VERSION}'s model config cannot pass",
                            "target gate_proj,up_proj,down_proj (peft moves them to the expert stacks) or all-linear")
        targets = "all-linear" if tuple(cell.lora_targets) == ("all-linear",) else _list(cell.lora_targets)
        o.update({
            "actor_rollout_ref.model.lora_rank": cell.lora_rank,
            "actor_rollout_ref.model.lora_alpha": cell.lora_alpha if cell.lora_alpha is not None else 2 * cell.lora_rank,
            "actor_rollout_ref.model.target_modules": targets,
            # verl's LoRA + vLLM path loads the base weights itself and syncs only the adapter.
            "actor_rollout_ref.rollout.load_format": "safetensors",
            "actor_rollout_ref.rollout.layered_summon": "True",
        })
    if cell.max_steps:
        o["trainer.total_training_steps"] = cell.max_steps
    system = cell.reward.system
    if system in RULE_REWARDS:
        o["reward.custom_reward_function.path"] = str(REWARD_MODULE)
        o["reward.custom_reward_function.name"] = f"compute_score_{system}"
    else:  # model rewards (prm, proxy_prm) through verl's reward-model workers
        path = cell.reward.options.get("model_path")
        if not path:
            from ..train.rewards import default_model_path

            path = str(default_model_path("prm-proxy" if system == "proxy_prm" else "prm"))
        o.update({"reward.reward_model.enable": "True", "reward.reward_model.model_path": str(path),
                  "reward.reward_model.rollout.name": "vllm",
                  "reward.reward_model.rollout.tensor_model_parallel_size": cluster.rollout_tp})
    return [f"{k}={v}" for k, v in o.items()]


def launch_command(overrides: Sequence[str], metrics_path: str | None = None) -> str:
    """The shell command line: VERL_FILE_LOGGER_PATH (where the file logger writes its JSON
    Lines, read back by `race import verl`) and python3 -m verl.trainer.main_ppo OVERRIDES."""
    env = f"VERL_FILE_LOGGER_PATH={shlex.quote(metrics_path)} " if metrics_path else ""
    lines = [f"{env}python3 -m verl.trainer.main_ppo"] + [f"    {shlex.quote(o)}" for o in overrides]
    return " \\\n".join(lines)


def write_dataset(source: str | Path, dest: str | Path) -> int:
    """Convert a cell's dataset (read by the one loader, suite.train.datasets.load: the embedded
    format, GSM8K, MATH-500, Polaris-53K or MATH; JSON Lines, JSON or parquet) into verl's RL
    parquet format, atomically; returns the row count.

    Each row: data_source, prompt (chat messages), ability, reward_model.ground_truth (the gold
    final answer, what suite/integrations/verl_reward.py compares against) and extra_info (index,
    question, solution for the dense reward)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..train.datasets import load, prompt_messages

    source, dest = Path(source), Path(dest)
    rows = [{"data_source": f"race/{source.stem}", "prompt": prompt_messages(r["question"]), "ability": "math",
             "reward_model": {"style": "rule", "ground_truth": r["answer"]},
             "extra_info": {"index": i, "question": r["question"], "solution": r["solution"] or ""}}
            for i, r in enumerate(load(source))]
    with atomic_path(dest) as tmp:
        pq.write_table(pa.Table.from_pylist(rows), tmp)
    return len(rows)


def config_dir() -> Path:
    """verl's packaged trainer config folder (needs verl installed, no verl import)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.origin:
        raise RaceError("verl is not installed, so its config cannot be checked", INSTALL_HINT)
    d = Path(spec.origin).parent / "trainer" / "config"
    if not (d / f"{CONFIG_NAME}.yaml").is_file():
        raise RaceError(f"verl at {d.parent.parent} has no trainer/config/{CONFIG_NAME}.yaml", INSTALL_HINT)
    return d


def compose(overrides: Sequence[str]) -> dict[str, Any]:
    """Compose `overrides` onto verl's packaged ppo_trainer config with Hydra's compose API and
    return it as a plain dict (interpolations left as written). An override naming a key verl
    does not have, or a malformed one, raises RaceError quoting Hydra's reason."""
    d = config_dir()
    try:
        from hydra import compose as hydra_compose
        from hydra import initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra
        from omegaconf import OmegaConf
    except ImportError:
        raise RaceError("Hydra is not installed, so verl's config cannot be composed", INSTALL_HINT) from None
    except Exception as e:  # hydra 1.3's parser refuses a newer antlr runtime at import
        raise RaceError(f"Hydra failed to load: {e}", INSTALL_HINT + " (it pins antlr4-python3-runtime==4.9.3)") from None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(d), version_base=None):
            cfg = hydra_compose(config_name=CONFIG_NAME, overrides=list(overrides))
    except Exception as e:  # hydra's ConfigCompositionException, OverrideParseException, ...
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise RaceError(f"verl {VERL_VERSION} config rejects the overrides: {msg}",
                        "check the key against verl/trainer/config/ppo_trainer.yaml") from None
    finally:
        GlobalHydra.instance().clear()
    return OmegaConf.to_container(cfg, resolve=False)


def installed_version() -> str | None:
    """verl's installed version string, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("verl")
    except PackageNotFoundError:
        return None
