#!/usr/bin/env python3
"""Writes a byte-level Hugging Face tokenizer folder: tokenizer.json (GPT-2's byte alphabet as the
256 first ids, no merges, so every byte is a token) with ChatML's special tokens <|endoftext|>,
<|im_start|> and <|im_end|>, and tokenizer_config.json with ChatML's chat template (Qwen2.5's,
without its tool calls) and eos_token <|im_end|>. What scripts/sft_demo.sh gives its model, as
no tokenizer can be downloaded.

    python3 scripts/byte_level_tokenizer.py DIR
"""
import json
import os
import sys

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] != 'system' %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)


def byte_alphabet():
    """GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest map above 255."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    alphabet = byte_alphabet()
    tokenizer = {
        "version": "1.0",
        "added_tokens": [
            {"id": 256 + i, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for i, token in enumerate(SPECIAL)
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "vocab": {alphabet[b]: b for b in range(256)}, "merges": []},
    }
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
              "bos_token": None, "model_max_length": 4096, "chat_template": CHAT_TEMPLATE}
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)


if __name__ == "__main__":
    main()
