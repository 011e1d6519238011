// The reference for the tokenizer tests: the gpt-3-encoder package's own JavaScript
// encoder.  Usage: node reference_encode.js ENCODER_DIR INPUT.json OUTPUT.json
// INPUT is a JSON list of texts as base64 bytes (they may hold invalid UTF-8, which
// TextDecoder turns into U+FFFD); OUTPUT gets the list of their token ids.
const fs = require('fs');
const path = require('path');
const [encoderDir, input, output] = process.argv.slice(2);
const { encode } = require(path.resolve(encoderDir, 'Encoder.js'));
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });  // keep a leading BOM: it is text here
const texts = JSON.parse(fs.readFileSync(input, 'utf-8')).map(b => decoder.decode(Buffer.from(b, 'base64')));
fs.writeFileSync(output, JSON.stringify(texts.map(t => encode(t))));
