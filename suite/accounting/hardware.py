"""The hardware table: what one accelerator delivers and draws (dense bf16 peak, memory
bandwidth, memory, board power), each number with its source document.

The facts live in `catalog/hardware.yaml` (schemas/hardware-v1.schema.json). `race plan` and
`race flops --hardware NAME` price time on them, the roofline floors (suite.accounting.roofline)
read peak and bandwidth, and the validator's energy and roofline rules read power and peak from
here -- never from the report being checked, whose own numbers a forger controls.

    from suite.accounting.hardware import accelerator, match
    h100 = accelerator("H100-SXM")          # RaceError naming the known ones when unknown
    match("NVIDIA H100 80GB")               # a report's hardware.accelerator -> the entry, or None
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import RaceError

FACTS = Path(__file__).with_name("catalog") / "hardware.yaml"
SCHEMA = "hardware-v1.schema.json"
TABLE = "hardware-v1"
"""How a report names the table its hardware numbers came from (`cost.hardware.table`)."""


@dataclass(frozen=True)
class Accelerator:
    """One accelerator of the table (all figures per accelerator)."""

    name: str
    """The name --hardware takes (H100-SXM)."""
    aliases: tuple[str, ...]
    """Names reports use for it (NVIDIA H100 80GB)."""
    peak_flops: float
    """Dense bf16 tensor peak, FLOP/s."""
    bandwidth: float
    """Memory bandwidth, bytes/s."""
    memory: float
    """Memory capacity, bytes."""
    tdp_watts: float
    """Maximum board power, watts."""
    sources: dict
    """field -> {url, document}."""

    def to_report(self) -> dict:
        """The `cost.hardware` block: the table entry a report was priced on, with its figures."""
        return {"table": TABLE, "name": self.name, "peak_flops": self.peak_flops, "memory_bandwidth": self.bandwidth,
                "tdp_watts": self.tdp_watts}


def _key(name: str) -> str:
    return re.sub(r"[\s_-]+", "", name).lower()


@lru_cache(maxsize=1)
def table() -> tuple[Accelerator, ...]:
    """Every accelerator of the table, checked against its schema (a broken shipped file is a
    bug, said in one line)."""
    import jsonschema
    import yaml

    from .. import jsonstrict, paths
    from ..yamlstrict import loads

    try:
        doc = loads(FACTS.read_text(encoding="utf-8"), str(FACTS))
        schema = jsonstrict.read(paths.schemas() / SCHEMA, hint="reinstall the suite")
    except (OSError, yaml.YAMLError) as e:
        raise RaceError(f"cannot read the hardware table {FACTS.name}: {e}", "reinstall the suite") from None
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    if err is not None:
        raise RaceError(f"{FACTS.name} at {'/'.join(map(str, err.absolute_path)) or 'top'}: {err.message}",
                        f"the file must follow schemas/{SCHEMA}")
    out = []
    for e in doc["accelerators"]:
        fields = ("peak_bf16_flops", "memory_bandwidth", "memory_bytes", "tdp_watts")
        out.append(Accelerator(e["name"], tuple(e["aliases"]), float(e["peak_bf16_flops"]["value"]),
                               float(e["memory_bandwidth"]["value"]), float(e["memory_bytes"]["value"]),
                               float(e["tdp_watts"]["value"]), {f: dict(e[f]["source"]) for f in fields}))
    keys = [k for a in out for k in {_key(n) for n in (a.name, *a.aliases)}]
    if len(keys) != len(set(keys)):     # one name, two accelerators
        raise RaceError(f"{FACTS.name}: a name or alias is listed twice", "each name must pick one accelerator")
    return tuple(out)


def match(name: str | None) -> Accelerator | None:
    """The entry a name (the table's, or an alias as reports write it) stands for, else None."""
    if not name:
        return None
    k = _key(str(name))
    for a in table():
        if k in (_key(n) for n in (a.name, *a.aliases)):
            return a
    return None


def accelerator(name: str) -> Accelerator:
    """The entry --hardware NAME names; RaceError listing the known ones when there is none."""
    a = match(name)
    if a is None:
        raise RaceError(f"unknown accelerator {name!r}",
                        f"known: {', '.join(a.name for a in table())} (suite/accounting/catalog/hardware.yaml)")
    return a


__all__ = ["Accelerator", "TABLE", "table", "match", "accelerator"]
