#!/usr/bin/env python3
"""An independent reader of TensorBoard event files, in plain Python 3 (standard library only).

Purpose: check the files megacpp's TensorBoardWriter (io/metrics/tensorboard_writer.cpp)
writes without trusting any of its code, and without TensorFlow or protobuf installed. It has
its own CRC-32C (bitwise, no table), its own TFRecord reader and a generic protobuf
wire-format parser, and knows only the field numbers of tensorflow/core/util/event.proto
(Event: wall_time=1 double, step=2 int64, file_version=3 string, summary=5 Summary) and
tensorflow/core/framework/summary.proto (Summary: value=1 repeated Value; Value: tag=1 string,
simple_value=2 float).

Usage: tensorboard_events.py DIR_OR_FILE
A directory means every events.out.tfevents.* file in it, in name order. Prints one JSON line
per event: {"file_version": ..., "wall_time": ..., "step": ...} for the header event and
{"tag": ..., "step": ..., "value": ..., "value_bits": ..., "wall_time": ...} per scalar, where
value is the float32 widened exactly to a double ("nan", "inf", "-inf" as strings) and
value_bits its IEEE-754 bit pattern. Other events print their field numbers.
Exits 0 when every record's length and data CRCs match and every event parses; otherwise
prints the reason to stderr and exits 1. Used by tests/io/test_tensorboard_writer.cpp.
"""
import json
import math
import os
import struct
import sys


class DecodeError(Exception):
    pass


def crc32c(data):
    """CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, bit by bit."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(blob):
    """TFRecords: u64 length, u32 masked CRC of the length bytes, data, u32 masked CRC of data."""
    pos, index = 0, 0
    while pos < len(blob):
        if pos + 12 > len(blob):
            raise DecodeError("record %d: truncated header at byte %d" % (index, pos))
        length_bytes = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if length_crc != masked_crc32c(length_bytes):
            raise DecodeError("record %d: length CRC mismatch at byte %d" % (index, pos))
        start, end = pos + 12, pos + 12 + length
        if end + 4 > len(blob):
            raise DecodeError("record %d: truncated data at byte %d" % (index, pos))
        data = blob[start:end]
        (data_crc,) = struct.unpack("<I", blob[end:end + 4])
        if data_crc != masked_crc32c(data):
            raise DecodeError("record %d: data CRC mismatch at byte %d" % (index, pos))
        yield data
        pos, index = end + 4, index + 1


def read_varint(buf, pos):
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise DecodeError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("varint longer than 10 bytes")


def parse_message(buf):
    """Generic wire-format parse: {field_number: [(wire_type, raw value), ...]}."""
    fields, pos = {}, 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        field, wire_type = key >> 3, key & 7
        if field == 0:
            raise DecodeError("field number 0")
        if wire_type == 0:
            value, pos = read_varint(buf, pos)
        elif wire_type == 1:
            if pos + 8 > len(buf):
                raise DecodeError("truncated fixed64")
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire_type == 2:
            length, pos = read_varint(buf, pos)
            if pos + length > len(buf):
                raise DecodeError("truncated length-delimited field %d" % field)
            value, pos = buf[pos:pos + length], pos + length
        elif wire_type == 5:
            if pos + 4 > len(buf):
                raise DecodeError("truncated fixed32")
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise DecodeError("unsupported wire type %d (field %d)" % (wire_type, field))
        fields.setdefault(field, []).append((wire_type, value))
    return fields


def last(fields, number, wire_type, default=None):
    """proto3 singular field: the last occurrence wins; a missing field has its default."""
    values = fields.get(number)
    if not values:
        return default
    found_type, value = values[-1]
    if found_type != wire_type:
        raise DecodeError("field %d has wire type %d, expected %d" % (number, found_type, wire_type))
    return value


def json_float(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def decode_event(data):
    """Event -> list of dicts (one per scalar, or one for any other event)."""
    fields = parse_message(data)
    wall_time_raw = last(fields, 1, 1)
    wall_time = struct.unpack("<d", wall_time_raw)[0] if wall_time_raw is not None else 0.0
    step = last(fields, 2, 0, 0)
    if step >= 1 << 63:  # int64 is the two's complement of the varint
        step -= 1 << 64
    common = {"wall_time": json_float(wall_time), "step": step}
    file_version = last(fields, 3, 2)
    if file_version is not None:
        return [dict(common, file_version=file_version.decode("utf-8"))]
    summary = last(fields, 5, 2)
    if summary is None:
        return [dict(common, fields=sorted(fields))]
    out = []
    for wire_type, value_bytes in parse_message(summary).get(1, []):
        if wire_type != 2:
            raise DecodeError("Summary.value has wire type %d" % wire_type)
        value = parse_message(value_bytes)
        tag = last(value, 1, 2, b"").decode("utf-8")
        simple = last(value, 2, 5)
        if simple is None:
            out.append(dict(common, tag=tag, fields=sorted(value)))
            continue
        (bits,) = struct.unpack("<I", simple)
        (number,) = struct.unpack("<f", simple)
        out.append({"tag": tag, "step": step, "value": json_float(number), "value_bits": bits,
                    "wall_time": common["wall_time"]})
    return out


def event_files(path):
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.startswith("events.out.tfevents."))
        if not names:
            raise DecodeError("no events.out.tfevents.* file in %s" % path)
        return [os.path.join(path, n) for n in names]
    return [path]


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    try:
        for name in event_files(argv[1]):
            with open(name, "rb") as f:
                blob = f.read()
            for data in read_records(blob):
                for line in decode_event(data):
                    print(json.dumps(line, sort_keys=True))
    except (DecodeError, OSError, UnicodeDecodeError) as e:
        sys.stdout.flush()
        sys.stderr.write("tensorboard_events.py: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
