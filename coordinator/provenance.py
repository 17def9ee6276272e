"""A study's provenance as each caller may see it.

An admin sees every answer a center gave, as received. An analyst sees what is needed to trust
the result without the raw intermediate numbers the protocols combine (a center's own bin counts,
refinement run totals, local U statistics, noised moment sums, ...): for each answer its center,
call, dataset, the request's public parameters, the ε the center spent, and the noise's mechanism
and scale where the answer states them, with the time received. The signed table a refinement
request carries (a peer's statement of its limits) is left out too: the result holds the
federated table's limits.

:func:`reproducibility` is the study's reproducibility record (what the exports and the Methods
paragraph, ``coordinator.reporting.exports`` and ``coordinator.reporting.methods_text``, are
written from) and
:func:`software` the coordinator's version and commit a result is stamped with.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coordinator.db import ReleaseRecord
from coordinator.models import (
    CenterRecord,
    FailedAnalysis,
    Provenance,
    Reproducibility,
    Software,
    StudyResult,
    StudySpec,
)
from shared.fields import canonical_method

# Request fields that are not public parameters of the question.
PRIVATE_REQUEST_FIELDS = frozenset({"table"})


def _noise(call: str, response: dict[str, Any]) -> tuple[str | None, float | None]:
    """(mechanism, scale) of an answer, where it states them."""
    if call in ("mwu", "dp_mwu"):
        noise = response.get("noise")
        return (noise["kind"], noise["scale"]) if isinstance(noise, dict) else (None, None)
    if call == "dp_boxplot":
        # DPBoxplot's version by its current name (shared.fields.canonical_method).
        return canonical_method(response.get("method")), response.get("outlier_scale")
    if call == "dp_quantiles":
        return response.get("algorithm"), None
    if call == "dp_tree_histogram":
        return "laplace", response.get("noise_scale")
    if call == "dp_threshold_counts":
        return "laplace", response.get("scale")
    if call == "dp_extremes":
        return "unbounded_walk", None
    if call == "yj_moments":
        return "laplace", None
    return None, None


def _epsilon(call: str, request: dict[str, Any] | None, response: dict[str, Any]) -> float | None:
    if call == "info":
        return None
    value = response.get("epsilon")
    if value is None and request is not None:
        value = request.get("epsilon")
    return float(value) if value is not None else 0.0


def provenance(record: ReleaseRecord, *, full: bool) -> Provenance:
    """One answer as an admin (``full``) or an analyst sees it."""
    asked = json.loads(record.request)
    request: dict[str, Any] | None = asked["request"]
    response: dict[str, Any] = json.loads(record.response)
    mechanism, scale = _noise(record.kind, response)
    if not full and request is not None:
        request = {k: v for k, v in request.items() if k not in PRIVATE_REQUEST_FIELDS}
    return Provenance(
        center=record.center, call=record.kind, dataset=asked["dataset"] or None,
        request=request, epsilon=_epsilon(record.kind, request, response), mechanism=mechanism,
        noise_scale=scale, response=response if full else None, received_at=record.received_at,
    )


# -- the reproducibility record ------------------------------------------------------------------

SOFTWARE_NAME = "fedstats"
NO_COMMIT = "unknown: the coordinator does not run from a git checkout"
FAILED = "failed: no result (nothing of it is reported)"
SEEDS = ("none public: every center draws its noise from a generator keyed by its own secret "
         "(docs/privacy.md); a public seed would let anyone remove the noise. The coordinator "
         "draws no random numbers of its own for a result.")



def git_commit(source: Path) -> str | None:
    """The commit checked out at ``source``, read from its git files (``HEAD``, the ref it
    names, ``packed-refs``; a worktree's ``.git`` file and ``commondir`` followed), without
    running git; None when ``source`` is no git checkout or the files do not say."""
    dot = source / ".git"
    try:
        if dot.is_file():  # a worktree or submodule: "gitdir: <path>"
            gitdir = Path(dot.read_text().removeprefix("gitdir:").strip())
            gitdir = gitdir if gitdir.is_absolute() else (source / gitdir).resolve()
        elif dot.is_dir():
            gitdir = dot
        else:
            return None
        common = gitdir
        if (gitdir / "commondir").is_file():
            common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
        head = (gitdir / "HEAD").read_text().strip()
        if head.startswith("ref:"):
            ref = head.removeprefix("ref:").strip()
            for root in (gitdir, common):
                if (root / ref).is_file():
                    head = (root / ref).read_text().strip()
                    break
            else:
                packed = common / "packed-refs"
                lines = packed.read_text().splitlines() if packed.is_file() else []
                head = next((line.split()[0] for line in lines
                             if line.endswith(" " + ref)), "")
    except (OSError, UnicodeDecodeError):
        return None
    return head if re.fullmatch(r"[0-9a-f]{40}", head) else None


@functools.lru_cache(maxsize=1)
def software() -> Software:
    """This coordinator's software: the installed package's version and, where its source is a
    git checkout, the commit checked out (:func:`git_commit`); never guessed."""
    try:
        version = importlib.metadata.version(SOFTWARE_NAME)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    commit = git_commit(Path(__file__).resolve().parent.parent)
    if commit is not None:
        return Software(name=SOFTWARE_NAME, version=version, commit=commit)
    return Software(name=SOFTWARE_NAME, version=version, commit=None, commit_note=NO_COMMIT)


def spec_sha256(spec: StudySpec) -> str:
    """SHA-256 of the spec as the coordinator stores it (its JSON, keys in model order)."""
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


def reproducibility(spec: StudySpec, result: StudyResult | None,
                    records: Sequence[ReleaseRecord],
                    algorithms: Sequence[str]) -> Reproducibility:
    """The study's reproducibility record, from its spec, result, the answers the centers
    gave and what computed each analysis (``algorithms``, in the spec's order:
    ``coordinator.analyses.algorithms``): each center's K, neighbouring relation and epoch
    from its recorded info (public: its catalog shows them), the ε it spent and the mechanisms
    its answers name."""
    infos: dict[str, dict[str, Any]] = {}
    spent: dict[str, float] = {}
    mechanisms: dict[str, set[str]] = {}
    for record in records:
        response = json.loads(record.response)
        if record.kind == "info":
            infos.setdefault(record.center, response)
            continue
        shown = provenance(record, full=False)
        spent[record.center] = spent.get(record.center, 0.0) + (shown.epsilon or 0.0)
        mechanisms.setdefault(record.center, set())
        if shown.mechanism:
            mechanisms[record.center].add(shown.mechanism)
    centers = []
    answered = {*infos, *spent}  # a center that never answered has nothing to record
    used = {c.center for c in result.center_status if c.status == "included"} if result else set()
    for center in dict.fromkeys([*(result.centers if result else []), *infos, *spent]):
        if center not in answered:
            continue
        info = infos.get(center) or {}
        dataset: dict[str, Any] = next(
            (d for d in info.get("datasets") or [] if d.get("name") == spec.dataset), {})
        centers.append(CenterRecord(
            center=center, included=center in used, k=info.get("k"),
            neighbouring=info.get("neighbouring"),
            epoch=dataset.get("epoch"), epsilon=spent.get(center, 0.0),
            mechanisms=sorted(mechanisms.get(center, set()))))
    stamped = result.software if result is not None else None
    return Reproducibility(
        software=stamped,
        software_note=None if stamped is not None else (
            "not recorded: the result was stored before the software was recorded"
            if result is not None else "no result yet"),
        spec_sha256=spec_sha256(spec), k=spec.k, centers=centers,
        algorithms=[FAILED if result is not None and i < len(result.analyses)
                    and isinstance(result.analyses[i], FailedAnalysis)
                    else algorithm for i, algorithm in enumerate(algorithms)],
        seeds=SEEDS)
