"""Compiled graphs for the CPU paths: ``torch.compile`` (inductor) of a model's forward, or its training
step, so that element-wise work (GELU, layer norms, masks, casts) runs fused into a few C++ loops
between the GEMMs instead of as one kernel each (``benchmarks/results/cpu_peak_amx.md``: what limits
the eager forward).

Config ``evaluation.compile`` and ``training.compile`` take ``auto``, ``on`` or ``off``
(:func:`resolve_compile`). ``auto`` compiles on a CPU when the measured profile of its kind
(:mod:`rerank_scaling.compute.cpu_profiles`) says the work a job does pays back the compile: a compile costs
seconds (tens on a loaded 2-core machine) and saves a fraction of each forward, so a job that scores
a few thousand pairs with a small model loses time by it. ``on`` compiles wherever torch can; CUDA's
``auto`` stays eager (not measured).

**Compiled once per model architecture.** :func:`compiled_forward` keeps, per process, one compiled
copy of each architecture (its module tree, config and dtypes) with every input dimension symbolic
(``dynamic=True``: one graph for every batch size and padded length, no recompile per length
bucket); a later checkpoint of the same architecture has its weights copied into that copy, which
reuses the graph (the weights are graph inputs, not constants). Across processes inductor's own
caches (its FX graph and AOT autograd caches) hold the generated code, under
``TORCHINDUCTOR_CACHE_DIR``; a job that finds it unset sets it to :data:`DEFAULT_CACHE_DIR` (relative
to the working directory: the repository root under Snakemake), so the C++ compile of a graph is paid
once per machine and code version, and later jobs only trace (seconds). Importing sentence_transformers
sets the variable to torch's own default (``/tmp/torchinductor_<user>``, a node's local disk under
SLURM) in the job's environment, so that value counts as unset (:func:`use_cache_dir`).
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: What the config may ask for.
REQUESTS: tuple[str, ...] = ("auto", "on", "off")
#: Inductor's cache directory variable, and where a job points it when it is unset.
CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
DEFAULT_CACHE_DIR = Path("results/.cache/inductor")

#: Per process: architecture key -> (the compiled copy's module, its compiled callable).
_COMPILED: dict[str, tuple[Any, Any]] = {}


def use_cache_dir(directory: str | os.PathLike[str] | None = None) -> Path:
    """Inductor's cache directory: ``$TORCHINDUCTOR_CACHE_DIR`` where set to other than torch's
    default (which a library's import sets it to: the module docstring), else ``directory``
    (default :data:`DEFAULT_CACHE_DIR`), which is then exported so inductor and its compile workers
    use it (and inductor's memoized paths cleared)."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    from torch._inductor.utils import clear_caches

    current = os.environ.get(CACHE_ENV)
    if current is None or os.path.abspath(current) == os.path.abspath(default_cache_dir()):
        os.environ[CACHE_ENV] = str(Path(directory or DEFAULT_CACHE_DIR).absolute())
        clear_caches()
    path = Path(os.environ[CACHE_ENV])
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_compile(requested: str, device: str, field: str, work: int, threshold: int | None) -> bool:
    """Whether a job compiles: ``on`` yes, ``off`` no; ``auto`` on a CPU when ``work`` (pairs scored,
    or optimizer steps) reaches the CPU kind's measured break-even ``threshold`` (None: never), on
    CUDA never (not measured)."""
    if requested not in REQUESTS:
        raise ValueError(f"{field}: unknown value {requested!r}; use one of {', '.join(REQUESTS)}")
    if requested != "auto":
        return requested == "on"
    return not device.startswith("cuda") and threshold is not None and work >= threshold


def architecture_key(model: Any) -> str:
    """What one compiled graph serves: the module tree (layers and their shapes), the Hugging Face
    config where there is one, and the parameters' dtypes."""
    config = getattr(getattr(model, "model", None), "config", None)
    dtypes = sorted({str(p.dtype) for p in model.parameters()})
    return "\n".join([repr(model), config.to_json_string() if config is not None else "", *dtypes])


def compiled_forward(model: Any) -> tuple[Any, Callable[[Any], Any]]:
    """(module, its compiled forward) computing ``model``'s function: the process's compiled copy of
    ``model``'s architecture with ``model``'s weights loaded (the first call of an architecture
    compiles when first run; later ones copy weights only). Run the module's context managers (e.g.
    :func:`rerank_scaling.precision.fp32_score_layer`) on the returned module, not on ``model``."""
    import torch

    key = architecture_key(model)
    if key not in _COMPILED:
        use_cache_dir()
        shell = copy.deepcopy(model)
        _COMPILED[key] = (shell, torch.compile(shell, dynamic=True))
        log.info("compiling %s (inductor; cache %s)", type(model).__name__, os.environ[CACHE_ENV])
    shell, forward = _COMPILED[key]
    if shell is not model:
        with torch.no_grad():
            shell.load_state_dict(model.state_dict())
    return shell, forward


def compile_in_place(module: Any) -> Any:
    """``module`` with its forward (and, in training, its backward through AOT autograd) compiled in
    place (``nn.Module.compile``: its parameters, state dict and saving are unchanged)."""
    use_cache_dir()
    module.compile(dynamic=True)
    return module
