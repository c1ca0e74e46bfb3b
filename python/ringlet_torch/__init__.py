"""ringlet's collectives inside PyTorch: ``import ringlet_torch`` registers the
``torch.distributed`` backend ``"ringlet"``, so ``dist.init_process_group("ringlet")`` (or
``backend="ringlet"`` in any DDP script) runs that group's collectives on ringlet's
communicator: ring, recursive-doubling, shared-window all-reduces over shm on one host, tcp
or rdma across hosts. Rendezvous goes through the store torch passes (``env://``, ``tcp://``,
``file://``, torchrun, ``ringlet launch``), and the group's timeout bounds every op.
CPU tensors only in this build.
"""
import inspect

import torch.distributed as dist

from . import _C

BACKEND = "ringlet"


def _create(store, rank, size, timeout):
    return _C.create_process_group(store, rank, size, timeout)


# Registering twice is an error in torch; a second import of this package finds it done.
# torch 2.x also asks which devices the backend serves.
if not hasattr(dist.Backend, BACKEND.upper()):
    _extra = {}
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        _extra["devices"] = ["cpu"]
    dist.Backend.register_backend(BACKEND, _create, **_extra)

__all__ = ["BACKEND"]
