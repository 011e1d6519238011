// The reference for the tiktoken tests: the js-tiktoken package's own encoder.
// Usage: node reference_tiktoken.js PACKAGE_DIR:ENCODING INPUT.json OUTPUT.json
// (e.g. data/js-tiktoken:cl100k_base).  INPUT is a JSON list of texts as base64 bytes
// (invalid UTF-8 becomes U+FFFD through TextDecoder, as the C++ side does); OUTPUT gets
// their token ids, special tokens' names encoded as ordinary text (encode_ordinary).
const fs = require('fs');
const path = require('path');
const [packageAndEncoding, input, output] = process.argv.slice(2);
const [packageDir, encoding] = packageAndEncoding.split(':');
const { Tiktoken } = require(path.resolve(packageDir, 'dist/lite.cjs'));
const ranks = require(path.resolve(packageDir, 'dist/ranks', encoding + '.cjs'));
const enc = new Tiktoken(ranks.default || ranks);
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
const texts = JSON.parse(fs.readFileSync(input, 'utf-8')).map(b => decoder.decode(Buffer.from(b, 'base64')));
fs.writeFileSync(output, JSON.stringify(texts.map(t => enc.encode(t, [], []))));
