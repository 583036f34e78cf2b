#!/usr/bin/env python3
"""Writes a small Distributed Checkpoint directory the way PyTorch 2.x's FileSystemWriter does,
for tests on machines with Debian's python3-torch 1.13 only (whose torch.distributed.checkpoint
cannot be imported): classes mirroring torch/distributed/checkpoint/metadata.py and
filesystem.py are registered under the real module names, so pickle names them as PyTorch does.

  dcp_fake_writer.py write DIR       DIR/__0_0.distcp, DIR/__1_0.distcp (two ranks: bytes items
                                     first, then tensor chunks, each a torch.save back to back)
                                     and DIR/.metadata (pickle.dump, default protocol)
  dcp_fake_writer.py check OUT       torch.load(OUT) (dcp_reader.py --out) must equal expected()
"""
import dataclasses
import enum
import io
import os
import pathlib
import pickle
import sys
import types
from typing import Any, Optional

import torch


# --- mirrors of PyTorch 2.x's classes -----------------------------------------------------

@dataclasses.dataclass
class ChunkStorageMetadata:
    offsets: torch.Size
    sizes: torch.Size


class _MEM_FORMAT_ENCODING(enum.Enum):
    TORCH_CONTIGUOUS_FORMAT = 0
    TORCH_CHANNELS_LAST = 1
    TORCH_PRESERVE_FORMAT = 2


@dataclasses.dataclass
class TensorProperties:
    dtype: torch.dtype = torch.float32
    layout: torch.layout = torch.strided
    requires_grad: bool = False
    memory_format: torch.memory_format = torch.contiguous_format
    pin_memory: bool = False
    strides: Optional[tuple] = None

    def __getstate__(self):
        # PyTorch <= 2.8 returns 5 fields, newer ones add strides: write both forms here.
        state = (self.dtype, self.layout, self.requires_grad,
                 _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT, self.pin_memory)
        return state if self.strides is None else state + (self.strides,)


@dataclasses.dataclass
class TensorStorageMetadata:
    properties: TensorProperties
    size: torch.Size
    chunks: list


@dataclasses.dataclass
class BytesStorageMetadata:
    pass


@dataclasses.dataclass
class StorageMeta:
    checkpoint_id: Any = None
    save_id: Optional[str] = None
    load_id: Optional[str] = None
    modules: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Metadata:
    state_dict_metadata: dict
    planner_data: Any = None
    storage_data: Any = None
    storage_meta: Optional[StorageMeta] = None
    version: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class MetadataIndex:
    fqn: str
    offset: Optional[torch.Size] = None
    index: Optional[int] = dataclasses.field(hash=False, compare=False, default=None)

    def __init__(self, fqn, offset=None, index=None):
        object.__setattr__(self, "fqn", fqn)
        object.__setattr__(self, "index", index)
        if offset is not None:
            object.__setattr__(self, "offset", torch.Size(offset))


@dataclasses.dataclass
class _StorageInfo:
    relative_path: str
    offset: int
    length: int
    transform_descriptors: Any = None

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if v is not None}


def _register(module_name, *classes):
    module = types.ModuleType(module_name)
    for cls in classes:
        cls.__module__ = module_name
        setattr(module, cls.__name__, cls)
    sys.modules[module_name] = module


_register("torch.distributed.checkpoint.metadata", ChunkStorageMetadata, _MEM_FORMAT_ENCODING, TensorProperties,
          TensorStorageMetadata, BytesStorageMetadata, StorageMeta, Metadata, MetadataIndex)
_register("torch.distributed.checkpoint.filesystem", _StorageInfo)


# --- the checkpoint -----------------------------------------------------------------------

def expected():
    return {
        "model.w": (torch.arange(12.0) * 0.5).view(4, 3),                        # rows split over 2 ranks
        "model.w2": torch.arange(16.0).view(4, 4).to(torch.bfloat16),           # 2x2 blocks
        "model.b": torch.tensor([1.0, -2.0, 3.5, 0.25, -0.125], dtype=torch.float16),
        "model.col": torch.arange(12.0).view(3, 4),                             # a column-major chunk
        "model.scalar": torch.tensor(7, dtype=torch.int64),
        "optim.step": 12,
        "optim.extra": {"lr": 0.001, "betas": (0.9, 0.95)},
    }


def chunks_of(key, full):
    """[(rank, offsets, chunk tensor)] as two ranks would write them."""
    if key == "model.w":
        return [(0, (0, 0), full[:2].clone()), (1, (2, 0), full[2:].clone())]
    if key == "model.w2":
        blocks = [(0, 0), (0, 2), (2, 0), (2, 2)]
        return [(n % 2, (i, j), full[i:i + 2, j:j + 2].clone()) for n, (i, j) in enumerate(blocks)]
    if key == "model.col":
        column_major = full.t().contiguous().t()  # strides (1, 3): torch.save keeps them
        return [(1, (0, 0), column_major)]
    return [(0, (0,) * full.dim(), full)]


def write(directory):
    os.makedirs(directory, exist_ok=True)
    state = expected()
    items = {0: [], 1: []}  # rank -> [(key, offsets, value, is_bytes)]
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            for rank, offsets, chunk in chunks_of(key, value):
                items[rank].append((key, offsets, chunk, False))
        else:
            items[0].append((key, None, value, True))
    state_dict_metadata, storage_data = {}, {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            strides = (4, 1) if key == "model.w2" else None
            chunks = [ChunkStorageMetadata(torch.Size(o), c.size()) for _, o, c in chunks_of(key, value)]
            state_dict_metadata[key] = TensorStorageMetadata(TensorProperties(dtype=value.dtype, strides=strides),
                                                             value.size(), chunks)
        else:
            state_dict_metadata[key] = BytesStorageMetadata()
    for rank, rank_items in items.items():
        name = f"__{rank}_0.distcp"
        with open(os.path.join(directory, name), "wb") as f:
            rank_items.sort(key=lambda item: not item[3])  # bytes items first, as PyTorch
            for index, (key, offsets, value, is_bytes) in enumerate(rank_items):
                start = f.tell()
                if is_bytes:
                    buffer = io.BytesIO()
                    torch.save(value, buffer)
                    f.write(buffer.getvalue())
                else:
                    torch.save(value, f)
                storage_data[MetadataIndex(key, offsets, index)] = _StorageInfo(name, start, f.tell() - start)
    metadata = Metadata(state_dict_metadata, planner_data={k: tuple(k.split(".", 1)) for k in state},
                        storage_data=storage_data,
                        storage_meta=StorageMeta(pathlib.Path(directory), "0123-save-id"), version="1.0.0")
    with open(os.path.join(directory, ".metadata"), "wb") as f:
        pickle.dump(metadata, f)


def check(out):
    loaded, want = torch.load(out), expected()
    if list(loaded) != list(want):
        return f"keys {list(loaded)} vs {list(want)}"
    for key, value in want.items():
        got = loaded[key]
        if isinstance(value, torch.Tensor):
            if not isinstance(got, torch.Tensor) or got.dtype != value.dtype or not torch.equal(got, value):
                return f"{key}: {got!r} vs {value!r}"
        elif got != value:
            return f"{key}: {got!r} vs {value!r}"
    return None


def main():
    if sys.argv[1] == "write":
        write(sys.argv[2])
        return 0
    if sys.argv[1] == "check":
        problem = check(sys.argv[2])
        if problem:
            print(problem, file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
