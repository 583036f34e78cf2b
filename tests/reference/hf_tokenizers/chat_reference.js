#!/usr/bin/env node
// Reference ids for tests/io/test_chat_template.cpp: a conversation rendered with a tokenizer
// folder's chat template by Hugging Face's JavaScript Jinja (@huggingface/jinja) and tokenized
// by its JavaScript `tokenizers` (@huggingface/tokenizers) without the post-processor's special
// tokens, as transformers' apply_chat_template(tokenize=True) does.
//
// usage: node chat_reference.js IN.json OUT.json
//   IN.json:  a JSON array of {"dir": TOKENIZER_DIR, "messages": [...], "add_generation_prompt": BOOL}
//   OUT.json: a JSON array with, per case, {"text": RENDERED, "ids": [...]} or {"error": MESSAGE}
'use strict';
const fs = require('fs');
const path = require('path');
const { Template } = require('@huggingface/jinja');
const { Tokenizer } = require('@huggingface/tokenizers');

if (process.argv.length !== 4) {
  process.stderr.write('usage: node chat_reference.js IN.json OUT.json\n');
  process.exit(2);
}
const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf-8'));
const content = (token) => (token && typeof token === 'object' ? token.content : token) || '';
const folders = new Map();  // dir -> {config, tokenizer}, each read once
const folder = (dir) => {
  if (!folders.has(dir)) {
    const config = readJson(path.join(dir, 'tokenizer_config.json'));
    folders.set(dir, { config, tokenizer: new Tokenizer(readJson(path.join(dir, 'tokenizer.json')), config) });
  }
  return folders.get(dir);
};
const [input, output] = process.argv.slice(2);
fs.writeFileSync(output, JSON.stringify(readJson(input).map(({ dir, messages, add_generation_prompt }) => {
  try {
    const { config, tokenizer } = folder(dir);
    const text = new Template(config.chat_template).render({
      messages, add_generation_prompt, bos_token: content(config.bos_token), eos_token: content(config.eos_token),
    });
    return { text, ids: tokenizer.encode(text, { add_special_tokens: false }).ids };
  } catch (e) {
    return { error: String(e.message) };
  }
})));
