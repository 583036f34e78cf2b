#!/usr/bin/env node
// Reference renderings for tests/io/test_jinja.cpp, from Hugging Face's own JavaScript Jinja
// for chat templates (the npm package @huggingface/jinja, the renderer of transformers.js and
// of the Hub's chat-template previews).
//
// usage: node render_reference.js IN.json OUT.json
//   IN.json:  a JSON array of {"template": TEXT, "variables": OBJECT}
//   OUT.json: a JSON array with, per case, {"text": RENDERED} or {"error": MESSAGE}
'use strict';
const fs = require('fs');
const { Template } = require('@huggingface/jinja');

if (process.argv.length !== 4) {
  process.stderr.write('usage: node render_reference.js IN.json OUT.json\n');
  process.exit(2);
}
const [input, output] = process.argv.slice(2);
const cases = JSON.parse(fs.readFileSync(input, 'utf-8'));
fs.writeFileSync(output, JSON.stringify(cases.map(({ template, variables }) => {
  try {
    return { text: new Template(template).render(variables) };
  } catch (e) {
    return { error: String(e.message) };
  }
})));
