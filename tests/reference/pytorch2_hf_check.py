#!/usr/bin/env python3
"""The safetensors library (Hugging Face's, as transformers uses it) reading a folder
megacpp-convert exported (tests/distributed/test_pytorch_interop.cpp; run in
scripts/setup_pytorch2.sh's root).

    pytorch2_hf_check.py HF_FOLDER FINAL_PARAMS DTYPE

Every weight of FINAL_PARAMS (--dump-final-params of the run that saved the checkpoint) must be
in the folder under its Hugging Face name (model.<name>, lm_head.weight), through the index when
the folder is sharded, equal to it in DTYPE (float32 or bfloat16), and config.json must describe
its shapes. Prints "hf checks passed" or fails naming what differs.
"""
import json
import os
import sys

import torch
from safetensors import safe_open


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    folder, final_path, dtype = argv[1], argv[2], getattr(torch, argv[3])
    final = torch.load(final_path, weights_only=True)
    index = os.path.join(folder, "model.safetensors.index.json")
    weight_map = json.loads(open(index).read())["weight_map"] if os.path.exists(index) else None
    files, loaded = {}, {}
    for filename in sorted(set(weight_map.values())) if weight_map else ["model.safetensors"]:
        with safe_open(os.path.join(folder, filename), framework="pt") as f:
            files[filename] = f.metadata()
            for key in f.keys():
                loaded[key] = f.get_tensor(key)
                if weight_map:
                    assert weight_map[key] == filename, f"{key} is in {filename}, the index says {weight_map[key]}"
    hf_name = lambda name: name if name == "lm_head.weight" else "model." + name
    assert set(loaded) == {hf_name(n) for n in final}, sorted(set(loaded) ^ {hf_name(n) for n in final})
    for name, t in final.items():
        got = loaded[hf_name(name)]
        assert got.dtype == dtype and torch.equal(got, t.to(dtype)), f"{hf_name(name)} differs"
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    assert config["hidden_size"] == final["norm.weight"].shape[0], config
    assert config["vocab_size"] == final["embed_tokens.weight"].shape[0], config
    assert config["intermediate_size"] == final["layers.0.mlp.up_proj.weight"].shape[0], config
    print(f"{len(loaded)} tensors in {len(files)} file(s) read by safetensors {__import__('safetensors').__version__}")
    print("hf checks passed")


if __name__ == "__main__":
    main(sys.argv)
