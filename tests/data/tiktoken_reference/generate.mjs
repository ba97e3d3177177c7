// Generates the reference ids of tiktoken's cl100k_base and o200k_base encodings (the npm
// package `tiktoken`, a WebAssembly build of tiktoken's Rust core) for edge-case strings, and
// token counts and id hashes for whole corpora. tests/data/tiktoken_tokenizer_test.cc compares
// trident's tokenizers against it. It does not run as part of the tests: its output is stored
// as tests/data/tiktoken_reference/expected.json.
//
// Usage (tiktoken is installed outside the repository):
//   mkdir -p /tmp/tk && (cd /tmp/tk && npm install tiktoken@1.0.22)
//   node tests/data/tiktoken_reference/generate.mjs --tiktoken /tmp/tk \
//        --corpus ../shared/data/shakespeare.txt --corpus ../shared/data/war_and_peace.txt \
//        > tests/data/tiktoken_reference/expected.json
//
//   node tests/data/tiktoken_reference/generate.mjs --tiktoken /tmp/tk --exhaustive DIR
//     writes DIR/cl100k_base.bin and DIR/o200k_base.bin: for every Unicode scalar value c in
//     order (surrogates skipped), the ids of kProbeTemplate with c, as a little-endian uint32
//     count and that many uint32 ids. TiktokenRanks.MatchesTiktokenOnEveryCodePoint reads the
//     directory named by TRIDENT_TIKTOKEN_EXHAUSTIVE_DIR (about 300 MB each, so not stored).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

import { idsHash, parseArgs } from '../tiktoken_golden.mjs';

// [text, allow_special]. Each string tests one thing the patterns or the merges must get right.
const kCases = [
  ['', false],
  ['Hello, world!', false],
  // Whitespace runs: spaces, tabs, newlines mixed, trailing, \s*[\r\n]+ and \s+(?!\S).
  ['a  b   c    d     e', false],
  ['   leading spaces', false],
  ['trailing spaces   ', false],
  ['trailing newline\n', false],
  ['line1\nline2\n\nline4\n\n\n', false],
  ['\n\n\n\n', false],
  [' \n \n', false],
  ['  \n\n  \n x', false],
  ['\t\tindented\twith\ttabs\t', false],
  ['mixed \t \n \r\n whitespace \n\t ', false],
  ['windows\r\nline\r\nendings\r\n', false],
  ['def foo(x):\n    return x ** 2\n\n\nprint(foo(3))\n', false],
  ['    \n    \n\tx', false],
  [' '.repeat(50) + 'x', false],
  ['\u00a0non-breaking\u00a0space em\u2003space\u3000ideographic\u202fnarrow', false],
  ['x\u180e\u180e y and x  \u180ey: U+180E is not White_Space', false],
  ['\u2028line separator\u2029paragraph separator\u0085next line\u000bvt\u000cff', false],
  // Punctuation runs with trailing newlines ([\r\n]* and o200k's [\r\n/]*).
  ['end.\n\nnext!!!\r\n', false],
  ['path/to/file // comment /* x */\n', false],
  ['https://example.com/path/to?query=1&x=y#frag', false],
  ['{"key": [1, 2, 3], "nested": {"a": null}}', false],
  // Digit groups: 1-3 digits per piece.
  ['1 12 123 1234 12345 123456 1234567', false],
  ['12345678901234567890', false],
  ['3.14159 1,000,000 -42 +7 1e-9 0x1F', false],
  ['abc123def456 ghi7', false],
  ['½ ¾ ² ³ Ⅻ ① 〇 ٣٤٥ १२३४ x²+y³', false],
  // Contractions, case-insensitive in both; o200k attaches them to the word.
  ["I'm sure you can't, won't, they're, we've, he'll, she'd and it's fine.", false],
  ["DON'T SHOUT'S: I'LL, WE'VE, THEY'RE, SHE'D, I'M", false],
  ["'s 'S 'll 'LL 'Ll 'lL 've 'VE 're 'RE 'd 'D 'm 'M 't 'T", false],
  ["'s's'''s 'll' 'd'd 'm'", false],
  ["rock 'n' roll, 'tis the season", false],
  ["x'\u017f and \u017f's: long s folds to s", false],
  ["'", false],
  // Case runs (o200k splits CamelCase and ALLCaps differently).
  ['CamelCaseWords and HTTPServer and iPhone XMLHttpRequest', false],
  ['ALLCAPS lower MiXeD Title Case', false],
  ['Ǆ ǅ ǆ title-case letters', false],
  // Non-Latin scripts.
  ['日本語のテキスト、東京タワー。', false],
  ['中文分词测试：你好，世界！', false],
  ['한국어 텍스트입니다', false],
  ['مرحبا بالعالم ١٢٣', false],
  ['हिन्दी देवनागरी लिपि में लिखा गया पाठ', false],
  ['Русский текст, привет мир! ПРИВЕТ', false],
  ['Ελληνικά: Καλημέρα κόσμε ΑΒΓ', false],
  ['שלום עולם', false],
  ['ไทย ภาษาไทย', false],
  // Emoji with ZWJ, skin tones, flags.
  ['🙂😀🎉👍🏽 emoji with a skin tone', false],
  ['👨\u200d👩\u200d👧\u200d👦 family and 🏳️\u200d🌈 flag ZWJ sequences', false],
  ['🇺🇸🇯🇵 regional indicator flags', false],
  ['hi😀there 😀😀😀', false],
  // Combining marks (o200k's run classes include \p{M}).
  ['e\u0301 a\u0300 o\u0302 decomposed accents', false],
  ['Z\u0324\u0354\u0367\u0311a\u0308\u0356l\u036e\u0312o\u0328\u0317 zalgo', false],
  ['\u0301leading mark and word\u0301\u0302', false],
  ['café naïve résumé façade straße ÀÁÂ', false],
  // Letters, numbers and marks assigned in Unicode 15.0-16.0 (tiktoken's tables know them,
  // PCRE2 10.42's do not): Kawi, Todhri, Egyptian hieroglyphs, CJK ext. H and I, Garay digits,
  // Kannada U+0CF3 and Arabic U+0897 marks; and one code point from Unicode 17.
  ['\u{11f04}\u{11f05}\'s \u{105c0}x \u{13460}\u{13461} \u{31350}\u{31351} \u{2ebf0}', false],
  ['\u{10d40}\u{10d41}\'s 1\u{10d42} \u{16130}\'s', false],
  ['x\u0cf3y \u0897a \u{11f00}\u{11f04}', false],
  ['\u{10d50}\u{10d70} \u{10d4a}\u{10d6f}', false],
  ['\u{33000}\'s', false],
  ['\ue000\uffff\u{10ffff} private use', false],
  ['\u0000 null \u0001 control \u007f delete', false],
  ['supercalifragilisticexpialidocious'.repeat(8), false],
  ['a'.repeat(300), false],
  // Special tokens, allowed and not.
  ['<|endoftext|>', false],
  ['<|endoftext|>', true],
  ['Hello<|endoftext|>World', true],
  ['Hello <|endoftext|> World', false],
  ['a<|endoftext|><|endoftext|>b', true],
  ['<|fim_prefix|>def f(<|fim_suffix|>)<|fim_middle|>', true],
  ['<|fim_prefix|>x<|endofprompt|>', false],
  ['<|endofprompt|> y', true],
  ['<|endoftext|', true],
];

// A probe string around one code point: c next to an apostrophe (letter, number or other vs
// the contraction), after a digit and a letter (number and letter runs), between spaces and
// newlines (White_Space, the lookahead), and after and before upper- and lower-case letters
// (o200k's run classes).
const kProbeTemplate = "{c}'s {c}1{c}a{c}{c}  {c}\n{c}A{c}a{c}A{c}'S";

function main() {
  const args = parseArgs(process.argv.slice(2));
  const root = path.resolve(args.tiktoken);
  const { get_encoding } = createRequire(path.join(root, 'package.json'))('tiktoken');
  const version = JSON.parse(
      fs.readFileSync(path.join(root, 'node_modules', 'tiktoken', 'package.json'), 'utf8')).version;
  if (args.exhaustive) {
    for (const name of ['cl100k_base', 'o200k_base']) {
      const enc = get_encoding(name);
      const chunks = [];
      for (let cp = 0; cp <= 0x10ffff; ++cp) {
        if (cp >= 0xd800 && cp <= 0xdfff) continue;
        const ids = enc.encode_ordinary(kProbeTemplate.replaceAll('{c}', String.fromCodePoint(cp)));
        const rec = new Uint32Array(ids.length + 1);
        rec[0] = ids.length;
        rec.set(ids, 1);
        chunks.push(Buffer.from(rec.buffer));
      }
      fs.writeFileSync(path.join(args.exhaustive, `${name}.bin`), Buffer.concat(chunks));
      enc.free();
    }
    return;
  }
  const lines = ['{', '  "generator": "tests/data/tiktoken_reference/generate.mjs",',
                 `  "tiktoken_version": ${JSON.stringify(version)},`,
                 `  "exhaustive_probe": ${JSON.stringify(kProbeTemplate)},`, '  "encodings": {'];
  const names = ['cl100k_base', 'o200k_base'];
  names.forEach((name, n) => {
    const enc = get_encoding(name);
    // Special tokens the encoding does not have stay ordinary text with 'all'.
    const encode = (text, allowSpecial) =>
      Array.from(allowSpecial ? enc.encode(text, 'all') : enc.encode_ordinary(text));
    lines.push(`    ${JSON.stringify(name)}: {`, '      "corpora": [');
    args.corpora.forEach((file, i) => {
      const text = fs.readFileSync(file).toString('utf8');
      const ids = encode(text, false);
      const entry = { file: path.basename(file), tokens: ids.length, ids_fnv1a64: idsHash(ids) };
      lines.push(`        ${JSON.stringify(entry)}${i + 1 < args.corpora.length ? ',' : ''}`);
    });
    lines.push('      ],', '      "cases": [');
    kCases.forEach(([text, allowSpecial], i) => {
      const entry = { text, allow_special: allowSpecial, ids: encode(text, allowSpecial) };
      lines.push(`        ${JSON.stringify(entry)}${i + 1 < kCases.length ? ',' : ''}`);
    });
    lines.push('      ]', `    }${n + 1 < names.length ? ',' : ''}`);
    enc.free();
  });
  lines.push('  }', '}');
  process.stdout.write(lines.join('\n') + '\n');
}

main();
