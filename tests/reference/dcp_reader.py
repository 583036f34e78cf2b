#!/usr/bin/env python3
"""An independent reader of PyTorch Distributed Checkpoint (torch.distributed.checkpoint,
FileSystemWriter) directories, for machines with an old PyTorch only.

Debian's python3-torch (1.13) cannot import torch.distributed.checkpoint under Python 3.11, so
this reads the format directly (PyTorch 2.0-2.9, torch/distributed/checkpoint/metadata.py and
filesystem.py):

  DIR/.metadata       pickle.dump(Metadata) (Python's default protocol)
      Metadata(state_dict_metadata={key: TensorStorageMetadata | BytesStorageMetadata},
               planner_data, storage_data={MetadataIndex: _StorageInfo}, storage_meta, version)
      TensorStorageMetadata(properties: TensorProperties, size: torch.Size,
                            chunks=[ChunkStorageMetadata(offsets: torch.Size, sizes: torch.Size)])
      TensorProperties pickles as a tuple through __getstate__: (dtype, layout, requires_grad,
          _MEM_FORMAT_ENCODING member, pin_memory[, strides (newest)]); before it moved into
          metadata.py it lived in torch.distributed._shard.sharded_tensor.metadata
      MetadataIndex(fqn, offset: torch.Size | None, index) is a frozen dataclass (a dict key)
      _StorageInfo(relative_path, offset, length[, transform_descriptors]); its __getstate__
          leaves out None fields
  DIR/<relative_path> each item is `length` bytes at `offset`: torch.save of a tensor chunk, or
                      for bytes items torch.save of the object

The pickled classes are mapped to the plain classes below by Unpickler.find_class; torch.Size,
dtypes and layouts are real torch objects.

Usage: dcp_reader.py DIR [--out FILE]
  prints one line per key, `key dtype shape` (e.g. "model.w float32 [4, 3]") or
  `key bytes repr(object)`, and with --out torch.save()s {key: full tensor or object} to FILE.
Importable: read_dcp(DIR) -> dict, load_metadata(DIR) -> Metadata.
"""
import argparse
import dataclasses
import enum
import io
import os
import pickle
import sys
from typing import Any

import torch

_METADATA = "torch.distributed.checkpoint.metadata"
_SHARD_METADATA = "torch.distributed._shard.sharded_tensor.metadata"  # PyTorch < 2.4's TensorProperties
_FILESYSTEM = "torch.distributed.checkpoint.filesystem"


class MemFormat(enum.Enum):  # _MEM_FORMAT_ENCODING
    TORCH_CONTIGUOUS_FORMAT = 0
    TORCH_CHANNELS_LAST = 1
    TORCH_PRESERVE_FORMAT = 2


class TensorProperties:
    dtype = None
    strides = None

    def __setstate__(self, state):
        if isinstance(state, dict):  # a writer without __getstate__
            self.__dict__.update(state)
            return
        self.dtype, self.layout, self.requires_grad, self.memory_format, self.pin_memory = state[:5]
        self.strides = state[5] if len(state) > 5 else None


@dataclasses.dataclass
class ChunkStorageMetadata:
    offsets: Any
    sizes: Any


@dataclasses.dataclass
class TensorStorageMetadata:
    properties: Any
    size: Any
    chunks: Any


@dataclasses.dataclass
class BytesStorageMetadata:
    pass


@dataclasses.dataclass
class StorageMeta:
    checkpoint_id: Any = None
    save_id: Any = None
    load_id: Any = None


@dataclasses.dataclass
class Metadata:
    state_dict_metadata: Any
    planner_data: Any = None
    storage_data: Any = None
    storage_meta: Any = None
    version: Any = None


@dataclasses.dataclass(frozen=True)
class MetadataIndex:
    fqn: str
    offset: Any = None
    index: Any = dataclasses.field(default=None, hash=False, compare=False)


@dataclasses.dataclass
class StorageInfo:  # _StorageInfo
    relative_path: str
    offset: int
    length: int
    transform_descriptors: Any = None


_CLASSES = {
    (_METADATA, "Metadata"): Metadata,
    (_METADATA, "TensorStorageMetadata"): TensorStorageMetadata,
    (_METADATA, "BytesStorageMetadata"): BytesStorageMetadata,
    (_METADATA, "ChunkStorageMetadata"): ChunkStorageMetadata,
    (_METADATA, "MetadataIndex"): MetadataIndex,
    (_METADATA, "StorageMeta"): StorageMeta,
    (_METADATA, "TensorProperties"): TensorProperties,
    (_METADATA, "_MEM_FORMAT_ENCODING"): MemFormat,
    (_SHARD_METADATA, "TensorProperties"): TensorProperties,
    (_SHARD_METADATA, "MEM_FORMAT_ENCODING"): MemFormat,
    (_FILESYSTEM, "_StorageInfo"): StorageInfo,
}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _CLASSES:
            return _CLASSES[(module, name)]
        if module.startswith("torch.distributed"):
            raise pickle.UnpicklingError(f"dcp_reader.py does not know {module}.{name}")
        if module == "pathlib._local":  # StorageMeta.checkpoint_id pickled by Python >= 3.13
            module = "pathlib"
        return super().find_class(module, name)


def load_metadata(directory):
    with open(os.path.join(directory, ".metadata"), "rb") as f:
        metadata = _MetadataUnpickler(f).load()
    if not isinstance(metadata, Metadata):
        raise ValueError(f"{directory}/.metadata holds {type(metadata).__name__}, not a DCP Metadata")
    return metadata


def _read_item(directory, info, what):
    if info.transform_descriptors:
        raise ValueError(f"{what}: stream transforms {info.transform_descriptors} are not supported")
    with open(os.path.join(directory, info.relative_path), "rb") as f:
        f.seek(info.offset)
        data = f.read(info.length)
    if len(data) != info.length:
        raise ValueError(f"{what}: {info.relative_path} ends before byte {info.offset + info.length}")
    # Bytes items hold pickled objects such as Megatron's args (an argparse.Namespace), which
    # PyTorch 2.6's default weights_only=True refuses; like Megatron, read your own checkpoints
    # with the full unpickler.
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)


def read_dcp(directory):
    """{key: full tensor (chunks assembled) or the stored object}, in the metadata's order."""
    metadata = load_metadata(directory)
    storage = {}
    for index, info in metadata.storage_data.items():
        offset = None if index.offset is None else tuple(index.offset)
        storage[(index.fqn, offset)] = info
    out = {}
    for key, item in metadata.state_dict_metadata.items():
        if isinstance(item, BytesStorageMetadata):
            out[key] = _read_item(directory, storage[(key, None)], f"key {key!r}")
            continue
        size = tuple(item.size)
        full = torch.zeros(size, dtype=item.properties.dtype)
        covered = torch.zeros(size, dtype=torch.bool)
        for chunk in item.chunks:
            what = f"key {key!r}, chunk at {tuple(chunk.offsets)}"
            if (key, tuple(chunk.offsets)) not in storage:
                raise ValueError(f"{what}: no storage record")
            piece = _read_item(directory, storage[(key, tuple(chunk.offsets))], what)
            if tuple(piece.shape) != tuple(chunk.sizes) or piece.dtype != full.dtype:
                raise ValueError(f"{what}: stored {piece.dtype} {tuple(piece.shape)}, "
                                 f"metadata says {full.dtype} {tuple(chunk.sizes)}")
            region = tuple(slice(o, o + s) for o, s in zip(chunk.offsets, chunk.sizes))
            if covered[region].any():
                raise ValueError(f"{what}: overlaps another chunk")
            full[region] = piece
            covered[region] = True
        if not covered.all():
            raise ValueError(f"key {key!r}: its chunks do not cover the tensor")
        out[key] = full
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--out")
    args = parser.parse_args()
    state = read_dcp(args.dir)
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            print(f"{key} {str(value.dtype).replace('torch.', '')} {list(value.shape)}")
        else:
            print(f"{key} bytes {value!r}")
    if args.out:
        torch.save(state, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
