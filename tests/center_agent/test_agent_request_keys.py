"""Request keys do not move: "the same question gets the same answer" holds across versions.

A center stores every answer under the key of its question's meaning (``center_agent.gate``)
and a coordinator stores every release a study received under the key of the call
(``coordinator.recording``). A key that changed between versions would make a ledger's stored
answers unreachable (a DP question asked again would be answered, and paid, afresh) and a
resumed study ask its centers again. The keys below were computed by the code before the
release kinds were declared once (``shared.kinds``) and the wire's field types shared
(``shared.fields``): one request of every kind, in a wording that exercises the kind's meaning
(levels swapped, a natural limit, a signed table).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.routing import APIRoute

from center_agent.api.routes.releases import router
from center_agent.gate.kinds import KINDS
from center_agent.ledger import request_key
from coordinator.recording import release_key
from shared import kinds

STATEMENT = {"center_id": "peer", "dataset": "cohort", "variable": "x", "groups": ["a", "b"],
             "k": 10, "limits": [0.0, 1.5, 3.0], "lower": "buffer", "upper": "natural"}
REQUESTS: dict[str, dict[str, Any]] = {
    "table": {"variable": "x", "groups": ["b", "a"], "k": 12, "lower": 0.0, "upper": "infinite"},
    "refine": {"variable": "x", "groups": ["b", "a"], "k": 10,
               "table": {"statement": STATEMENT, "signature": "A" * 88}},
    "mwu": {"variable": "x", "groups": ["b", "a"], "epsilon": 0.5},
    "dp_quantiles": {"variable": "x", "group": "a", "epsilon": 0.25, "bounds": [0, 100],
                     "levels": [0.25, 0.5, 0.75], "algorithm": "private_quantile"},
    "dp_boxplot": {"variable": "x", "epsilon": 1.0, "bounds": [-5.5, 5.5], "n_public": 40},
    "dp_extremes": {"variable": "x", "group": "b", "epsilon": 0.125, "bounds": [0, 1e6]},
    "dp_tree_histogram": {"variable": "x", "epsilon": 0.375, "bounds": [0, 60],
                          "grid": [0, 64], "depth": 3, "branching": 4},
    "dp_threshold_counts": {"variable": "x", "epsilon": 0.5, "bounds": [0, 60], "lower": 2.5,
                            "upper": 40.0},
    "yj_moments": {"variable": "x", "group": "a", "lmbda": 0.75, "epsilon": 0.02,
                   "bounds": [-10, 10]},
    "quantile_loss": {"variable": "x", "u": 3.25, "level": 0.9},
    "dp_describe": {"variable": "x", "group": "b", "epsilon": 0.8, "bounds": [0, 120],
                    "bins": 12},
    "categorical": {"variable": "x", "groups": ["b", "a"], "k": 12},
    "dp_categorical": {"variable": "x", "group": "a", "epsilon": 0.5},
    "missing": {"variable": "x"},
    "dp_mwu": {"variable": "x", "groups": ["b", "a"], "epsilon": 0.5},
    "dp_life_table": {"variable": "readmission", "group": "b", "epsilon": 0.5,
                      "grid": [0, 30, 60.0, 90]},
}
CENTER_KEYS = {
    "table": "a395074ae203d7f01b162bb641c9fcaee9b13b60586e0d35aac7dddb13450dde",
    "refine": "93f68c3fb7f2346afe7126cfdf61928d5b4ca76a3068dcd38274b83add620788",
    "mwu": "ff3721bb9414836b113eb362bb6f42d531bb9a2b0fc1d60307a93156ed017119",
    "dp_quantiles": "98ce98962196b167b6bc43d13e4ba24ac5bfe7ebb7583e51b7b7bd2c33552d84",
    "dp_boxplot": "d89120a8d9d32fdd1444785742f56c2f51a68128c473588c64e002a92a37ff8a",
    "dp_extremes": "fd308a0a462fe7f6f4f2e8eb603855f59a25b0c198f0a7fe88f980b8b46fef56",
    "dp_tree_histogram": "813c2b9134583ce6334ac91e413e7cd4e835acde189b7b9e1afba2faca50e307",
    "dp_threshold_counts": "dd4ac484c49614645a04cee0f835f71e9a6c3873a0b050b01764abd4c4a3170a",
    "yj_moments": "33549099afaafd6177891905d64cdff57c8deb2938aead8959f24b20cd9746a1",
    "quantile_loss": "113ec468984d33dcb240dd4f42e04492799774e3e038d02be153ffb4e2790fb5",
    "dp_describe": "332bcbbf13b8b937e241e93f79a4d32baf6ddcbd25a357b56514b584422d1e03",
    "categorical": "6f88c2c74ef7465c1e2de3931b8502922836ee5f28d37e4eae3ed0bc7acd3d76",
    "dp_categorical": "bf1afc66db5525b2d34191ba3aec5be223d9bac81bd36efdd11173e667b1d27e",
    "missing": "5946a5b11deb866067b0183be230e1cce4feb4022d755a14c648dc9e92aa97ae",
    "dp_mwu": "68d9ee26f460812496f8f878855956e4bdd3431b5619d57fdc55e4bad9a20035",
    "dp_life_table": "303013d179f7a4d5e7bafa506e6560a674f723ed05a2e61b3ca43ec2542ff2ac",
}
STUDY_KEYS = {
    "table": "bb96d3d750a886fbda946dc8f260b8aa6cc01128e1c0a3535ddfc2a2a8441f15",
    "refine": "f0d44fe1ff1a1262d126389cde9d2cf1189d953180c5c277f332baafd2b5ba46",
    "mwu": "f8d4cff42a71eb2dba20cf7c1b1524bd34d1f41e4247863fa190397b7f3be210",
    "dp_quantiles": "05d0abbf72c1b5d1b78c8914db881f1bb372b3663f2f875e3b34d216954c7574",
    "dp_boxplot": "7787f274853d5ac641c626cfc30a0ec549cd56d21f660b0b4583578033295a58",
    "dp_extremes": "81f7308ad9e516cdf0b080946667672852a3eb4e0691ad68ecf3498a96feabbf",
    "dp_tree_histogram": "ca294f26707b2e039bdb08677dad9934b1068f45c57dd14127743bd688f574f1",
    "dp_threshold_counts": "0d4edb1ed391408bec803519200a40eb93b08554ee6968db58ea4d12c0996aff",
    "yj_moments": "f4185ec813fc8968988bca4040f2f373c2c916c316d1aaefd0ccce8a9befafef",
    "quantile_loss": "592fe20b7baa5f79e6ce56143f8f3a6632e9ff86965f0009bb8ea02e670f2b3b",
    "dp_describe": "7df4a744cf7403fb2fc1983ebe91e339b5366249035065c07dfd3e358c125a3c",
    "categorical": "e39bbe4fd6d39b354bfeb39ec01830f8a3790231c5d92104a268337be9316182",
    "dp_categorical": "e4b68cb4027a8aab1db6e57bdc2d2305b7046855894a08d865c816b897ca7dbe",
    "missing": "1687ae709509cb9fe1cb88ce0a677a9a20a70bc283d2470e8c56c187d56c4286",
    "dp_mwu": "fe517f99f680c98468554ef5288214b7488ef281330db73cbe0e2d1aab493318",
    "dp_life_table": "cb75a5079c0a6720d338f827b2ef8e21d835b9f4d07cca68ac8666c3142d1c73",
}


def test_the_gate_answers_every_declared_kind_once() -> None:
    assert [kind.wire for kind in KINDS] == list(kinds.KINDS)
    assert len({kind.name for kind in kinds.KINDS}) == len(kinds.KINDS)
    routes = {route.path: route for route in router.routes if isinstance(route, APIRoute)}
    assert set(routes) == {kind.path for kind in kinds.KINDS} | {kinds.BATCH_PATH}
    for kind in kinds.KINDS:
        assert routes[kind.path].response_model is kind.release
        assert routes[kind.path].name == kind.name


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_a_center_keys_a_question_as_it_always_did(kind: Any) -> None:
    request = kind.request_model.model_validate(REQUESTS[kind.name])
    # No declared metadata (a variable without a resolution keys as it always did).
    dataset = SimpleNamespace(name="cohort", levels=("a", "b"),
                              config=SimpleNamespace(metadata={}))
    question = kind.question(None, dataset, request)
    key = request_key("cohort", question.variable, kind.name,
                      {"meaning": question.meaning, "epoch": 3}, question.epsilon)
    assert key == CENTER_KEYS[kind.name]


@pytest.mark.parametrize("kind", kinds.KINDS, ids=lambda kind: kind.name)
def test_a_study_keys_a_call_as_it_always_did(kind: kinds.Kind[Any, Any]) -> None:
    key, _ = release_key(kind.name, "cohort", kind.request.model_validate(REQUESTS[kind.name]))
    assert key == STUDY_KEYS[kind.name]
