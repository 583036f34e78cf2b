#!/usr/bin/env node
// Reference ids for tests/io/test_hf_tokenizer.cpp, from Hugging Face's own JavaScript port of
// `tokenizers` (the npm package @huggingface/tokenizers) reading a folder's tokenizer.json and
// tokenizer_config.json.
//
// usage: node encode_reference.js TOKENIZER_DIR IN.json OUT.json
//   IN.json:  a JSON array of strings (documents)
//   OUT.json: a JSON array with, per document, the ids `encode(document)` returns (with the
//             special tokens the post-processor adds, as Megatron's HuggingFaceTokenizer)
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('@huggingface/tokenizers');

if (process.argv.length !== 5) {
  process.stderr.write('usage: node encode_reference.js TOKENIZER_DIR IN.json OUT.json\n');
  process.exit(2);
}
const [dir, input, output] = process.argv.slice(2);
const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf-8'));
const configFile = path.join(dir, 'tokenizer_config.json');
const tokenizer = new Tokenizer(readJson(path.join(dir, 'tokenizer.json')), fs.existsSync(configFile) ? readJson(configFile) : {});
const documents = readJson(input);
if (!Array.isArray(documents) || !documents.every((d) => typeof d === 'string')) {
  process.stderr.write(`${input}: expected a JSON array of strings\n`);
  process.exit(2);
}
fs.writeFileSync(output, JSON.stringify(documents.map((d) => tokenizer.encode(d).ids)));
