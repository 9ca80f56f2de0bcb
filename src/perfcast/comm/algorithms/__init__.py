"""Collective algorithm registry: one algorithm per module, keyed by ``Algorithm``.

========================= ===================================== ==============================
algorithm                 collectives                           module
========================= ===================================== ==============================
ring                      all-reduce, all-gather, reduce-scatter ``ring``
tree (double binary)      all-reduce                            ``tree``
nvls (NVLink SHARP)       all-reduce                            ``nvls``
hierarchical              all-reduce, all-gather, reduce-scatter ``hierarchical``
hierarchical              all-to-all                            ``all_to_all``
direct (pairwise)         all-to-all                            ``all_to_all``
pxn (PXN / DeepEP)        all-to-all                            ``all_to_all``
p2p                       send-recv                             ``p2p``
========================= ===================================== ==============================

``algorithm_cost(algorithm, kind, ...)`` dispatches; ``supported_algorithms(kind)`` lists the
algorithms of a collective. Which one runs by default is ``comm.select``'s business.
"""

from __future__ import annotations

from collections.abc import Callable

from perfcast.calibration.comm_protocols import CommProtocols
from perfcast.comm.algorithms import all_to_all, hierarchical, nvls, p2p, ring, tree
from perfcast.comm.algorithms.base import Algorithm, AlgorithmCost, LatencyFamily
from perfcast.comm.collectives import Collective
from perfcast.comm.topology import GroupTopology
from perfcast.errors import InputError
from perfcast.specs.hardware import SystemSpec

CostFunction = Callable[[Collective, object, GroupTopology, SystemSpec, CommProtocols],
                        AlgorithmCost]

_A2A = Collective.ALL_TO_ALL
_REGISTRY: dict[tuple[Algorithm, Collective], CostFunction] = {
    **{(Algorithm.RING, k): (lambda kind, s, t, sy, p: ring.ring_cost(kind, s, t))
       for k in ring.KINDS},
    **{(Algorithm.TREE, k): (lambda kind, s, t, sy, p: tree.tree_cost(kind, s, t, p))
       for k in tree.KINDS},
    **{(Algorithm.NVLS, k): nvls.nvls_cost for k in nvls.KINDS},
    **{(Algorithm.HIERARCHICAL, k): (lambda kind, s, t, sy, p:
                                     hierarchical.hierarchical_cost(kind, s, t))
       for k in hierarchical.KINDS},
    (Algorithm.HIERARCHICAL, _A2A): (lambda kind, s, t, sy, p:
                                     all_to_all.hierarchical_all_to_all_cost(kind, s, t)),
    (Algorithm.DIRECT, _A2A): lambda kind, s, t, sy, p: all_to_all.direct_cost(kind, s, t),
    (Algorithm.PXN, _A2A): lambda kind, s, t, sy, p: all_to_all.pxn_cost(kind, s, t),
    (Algorithm.P2P, Collective.SEND_RECV): lambda kind, s, t, sy, p: p2p.p2p_cost(kind, s, t),
}


def supported_algorithms(kind: Collective) -> tuple[Algorithm, ...]:
    """Algorithms that implement ``kind``, in registry order."""
    return tuple(a for a in Algorithm if (a, kind) in _REGISTRY)


def algorithm_cost(algorithm: Algorithm | str, kind: Collective, size_bytes,
                   topo: GroupTopology, system: SystemSpec,
                   protocols: CommProtocols) -> AlgorithmCost:
    """``AlgorithmCost`` of ``algorithm`` running ``kind``; ``InputError`` naming the
    supported algorithms when it does not implement ``kind``."""
    algorithm = Algorithm(algorithm)
    function = _REGISTRY.get((algorithm, kind))
    if function is None:
        names = ", ".join(a.value for a in supported_algorithms(kind))
        raise InputError("algorithm", algorithm.value,
                         f"does not implement {kind.value} (supported: {names})")
    return function(kind, size_bytes, topo, system, protocols)


__all__ = ["Algorithm", "AlgorithmCost", "LatencyFamily", "algorithm_cost",
           "supported_algorithms"]
