#!/usr/bin/env python3
"""An independent writer of Megatron-LM's indexed dataset (PREFIX.bin + PREFIX.idx).

Usage: megatron_indexed_writer.py SPEC.json PREFIX
SPEC.json: {"dtype": "uint16", "documents": [[[1, 2, 3], [4]], [[5, 6]]]}
  dtype: a NumPy name from Megatron's DType enum (uint8 int8 int16 int32 int64 float64 float32 uint16)
  documents: each document is a list of sequences, each sequence a list of token ids.

Follows megatron/core/datasets/indexed_dataset.py: IndexedDatasetBuilder.add_item appends each
sequence's bytes to the .bin, end_document appends len(sequence_lengths) to document_indices
(which starts as [0]), and _IndexWriter writes the header with struct.pack and the arrays with
NumPy. Only Python 3 and NumPy: no torch, no Megatron.
"""
import json
import struct
import sys

import numpy

_INDEX_HEADER = b"MMIDIDX\x00\x00"

# Megatron's DType enum: name -> code.
DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5,
               "float64": 6, "float32": 7, "uint16": 8}


class Builder:
    """IndexedDatasetBuilder without torch or multimodal support."""

    def __init__(self, bin_path, dtype):
        self.data_file = open(bin_path, "wb")
        self.dtype = dtype
        self.sequence_lengths = []
        self.document_indices = [0]

    def add_item(self, tokens):
        np_array = numpy.array(tokens, dtype=self.dtype)
        self.data_file.write(np_array.tobytes(order="C"))
        self.sequence_lengths.append(np_array.size)

    def end_document(self):
        self.document_indices.append(len(self.sequence_lengths))

    def finalize(self, idx_path):
        self.data_file.close()
        itemsize = numpy.int64(numpy.dtype(self.dtype).itemsize)
        pointers = []
        current = numpy.int64(0)
        for length in self.sequence_lengths:
            pointers.append(current.item())
            current += length * itemsize
        with open(idx_path, "wb") as idx:
            idx.write(_INDEX_HEADER)
            idx.write(struct.pack("<Q", 1))
            idx.write(struct.pack("<B", DTYPE_CODES[numpy.dtype(self.dtype).name]))
            idx.write(struct.pack("<Q", len(self.sequence_lengths)))
            idx.write(struct.pack("<Q", len(self.document_indices)))
            numpy.array(self.sequence_lengths, dtype="<i4").tofile(idx)
            numpy.array(pointers, dtype="<i8").tofile(idx)
            numpy.array(self.document_indices, dtype="<i8").tofile(idx)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    spec = json.load(open(sys.argv[1]))
    prefix = sys.argv[2]
    dtype = numpy.dtype(spec["dtype"]).newbyteorder("<")
    builder = Builder(prefix + ".bin", dtype)
    for document in spec["documents"]:
        for sequence in document:
            builder.add_item(sequence)
        builder.end_document()
    builder.finalize(prefix + ".idx")


if __name__ == "__main__":
    main()
