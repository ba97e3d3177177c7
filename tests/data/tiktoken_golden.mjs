// Generates the tokenizer's reference data with OpenAI's tokenizer (the npm package `tiktoken`,
// a WebAssembly build of tiktoken's Rust core): the ids of the `gpt2` encoding for a list of
// test strings, and token counts and id hashes for whole corpora. The C++ tests
// (tests/data/gpt2_tokenizer_test.cc) compare trident's tokenizer against its output.
// It does not run as part of the tests: its output is stored as tests/data/tiktoken_gpt2_golden.json.
//
// Usage (tiktoken is installed outside the repository):
//   mkdir -p /tmp/tk && (cd /tmp/tk && npm install tiktoken@1.0.22)
//   node tests/data/tiktoken_golden.mjs --tiktoken /tmp/tk \
//        --corpus ../shared/data/shakespeare.txt --corpus ../shared/data/war_and_peace.txt \
//        > tests/data/tiktoken_gpt2_golden.json
//
//   node tests/data/tiktoken_golden.mjs --tiktoken /tmp/tk --exhaustive /tmp/gpt2_exhaustive.bin
//     writes, for every Unicode scalar value c in order (surrogates skipped), the ids of
//     exhaustive_probe(c) as a little-endian uint32 count followed by that many uint32 ids.
//     The C++ test Gpt2Tokenizer.MatchesTiktokenOnEveryCodePoint reads the file named by the
//     environment variable TRIDENT_TIKTOKEN_EXHAUSTIVE (about 160 MB, so it is not stored;
//     generating it takes about a minute).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

// (Exported, with idsHash, for tests/data/tiktoken_reference/generate.mjs.)
export function parseArgs(argv) {
  const args = { tiktoken: process.cwd(), corpora: [], exhaustive: null };
  for (let i = 0; i < argv.length; ++i) {
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
      return argv[++i];
    };
    if (argv[i] === '--tiktoken') args.tiktoken = next();
    else if (argv[i] === '--corpus') args.corpora.push(next());
    else if (argv[i] === '--exhaustive') args.exhaustive = next();
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  return args;
}

// 64-bit FNV-1a, the hash the C++ test recomputes (tests/data/golden.h).
const kFnvOffset = 0xcbf29ce484222325n;
const kFnvPrime = 0x100000001b3n;
const kMask64 = (1n << 64n) - 1n;
function fnv1a64(bytes) {
  let h = kFnvOffset;
  for (const b of bytes) h = ((h ^ BigInt(b)) * kFnvPrime) & kMask64;
  return h.toString(16).padStart(16, '0');
}
// The hash of a token sequence: FNV-1a over each id as 4 little-endian bytes.
export function idsHash(ids) {
  const bytes = new Uint8Array(ids.length * 4);
  const view = new DataView(bytes.buffer);
  ids.forEach((id, i) => view.setUint32(4 * i, id, true));
  return fnv1a64(bytes);
}

// [text, allow_special]. Each string tests one thing the pattern or the merges must get right.
const kCases = [
  ['', false],
  ['Hello, world!', false],
  ['hello world', false],
  ["I'm sure you can't, won't, they're, we've, he'll, she'd and it's fine.", false],
  ["DON'T SHOUT'S: upper-case contractions are not special", false],
  ["'s's'''s 'll' 'd'd 'm'", false],
  ["rock 'n' roll, 'tis the season", false],
  ["'", false],
  ["'s", false],
  ['12345678901234567890', false],
  ['3.14159 1,000,000 -42 +7 1e-9 0x1F', false],
  ['x=1;y=2;z=x+y', false],
  ['Phone: (555) 123-4567, ext. 89', false],
  ['abc123def456 ghi7', false],
  ['   leading spaces', false],
  ['trailing spaces   ', false],
  ['a  b   c    d     e', false],
  ['line1\nline2\n\nline4\n\n\n', false],
  ['\n\n\n\n', false],
  ['\n', false],
  [' ', false],
  ['  ', false],
  ['\t', false],
  ['\t\tindented\twith\ttabs\t', false],
  ['mixed \t \n \r\n whitespace \n\t ', false],
  ['windows\r\nline\r\nendings\r\n', false],
  ['    \n    \n', false],
  ['  \n  hello  \n  ', false],
  ['def foo(x):\n    return x ** 2\n\n\nprint(foo(3))\n', false],
  ['\u00a0non-breaking\u00a0space\u00a0', false],
  ['em\u2003space\u3000ideographic\u202fnarrow\u205fmath', false],
  ['x\u180e\u180e y and x  \u180ey: U+180E is not White_Space', false],
  ['\u2028line separator\u2029paragraph separator', false],
  ['\u0085next line\u000bvertical tab\u000cform feed', false],
  ['a\u200bb\u200cc\u200dd\u2060e zero-width characters', false],
  ['\ufeffbyte order mark at the start', false],
  ['\u0000 null \u0001 control \u007f delete', false],
  ['café naïve résumé façade coöperate', false],
  ['Ångström Ærøskøbing Œuvre straße ß ÀÁÂÃÄÅ', false],
  ['Ǆ ǅ ǆ title-case letters', false],
  ['ﬁ ﬀ ligatures', false],
  ['e\u0301 a\u0300 o\u0302 decomposed accents (combining marks)', false],
  ['Z\u0324\u0354\u0367\u0311\u0313a\u0308\u0356\u032d\u0308\u0307l\u036e\u0312\u036bo\u0328\u0317\u034a zalgo', false],
  ['Ελληνικά: Καλημέρα κόσμε', false],
  ['Русский текст, привет мир!', false],
  ['日本語のテキスト、東京タワー。', false],
  ['中文分词测试：你好，世界！', false],
  ['한국어 텍스트입니다 \u1112\u1161\u11ab decomposed', false],
  ['हिन्दी देवनागरी लिपि', false],
  ['ไทย ภาษาไทย', false],
  ['ᠮᠣᠩᠭᠣᠯ Mongolian', false],
  ['مرحبا بالعالم ١٢٣', false],
  ['שלום עולם', false],
  ['🙂😀🎉👍🏽 emoji with a skin tone', false],
  ['👨\u200d👩\u200d👧\u200d👦 family and 🏳️\u200d🌈 flag ZWJ sequences', false],
  ['🇺🇸🇯🇵 regional indicator flags', false],
  ['hi😀there 😀😀😀', false],
  ['$100 €50 £30 ¥1000 ₹500', false],
  ['½ ¾ ² ³ Ⅻ ① 〇 ٣٤٥ ໒ x²+y³', false],
  ['You\u2019re \u201cquoted\u201d \u2014 em dash\u2026 ellipsis', false],
  [' !!! ??? ... --- ***', false],
  ['!!!!!!!!!!!!!!!!????????????????................', false],
  ['https://example.com/path/to?query=1&x=y#frag', false],
  ['{"key": [1, 2, 3], "nested": {"a": null, "b": true}}', false],
  ['Pneumonoultramicroscopicsilicovolcanoconiosis', false],
  ['supercalifragilisticexpialidocious'.repeat(8), false],
  ['a'.repeat(300), false],
  ['9'.repeat(100), false],
  [' '.repeat(50) + 'x', false],
  ['\ue000\uffff\u{10ffff} private use and noncharacters', false],
  // Letters and digits assigned in Unicode 15.0-16.0 (tiktoken classifies them; PCRE2 10.42,
  // whose tables are Unicode 14, does not): Kawi, Todhri, Egyptian hieroglyphs extended, CJK
  // extensions H and I, Garay digits. And one from Unicode 17, which tiktoken does not know.
  ['\u{11f04}\u{11f05}\'s \u{105c0}x \u{13460}\u{13461} \u{31350}\u{31351} \u{2ebf0}', false],
  ['\u{10d40}\u{10d41}\'s 1\u{10d42} \u{16130}\'s', false],
  ['\u{33000}\'s', false],
  ['First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n', false],
  ['<|endoftext|>', false],
  ['<|endoftext|>', true],
  ['Hello<|endoftext|>World', true],
  ['Hello <|endoftext|> World', false],
  ['Hello <|endoftext|> World', true],
  ['a<|endoftext|><|endoftext|>b', true],
  ['document one.\n<|endoftext|>\ndocument two.', true],
  ['<|endoftext|', true],
  ['<|startoftext|> is not special in gpt2', true],
];

// A probe string around one code point: c next to an apostrophe (letter or number vs other),
// after a digit and a letter (number and letter runs), between spaces and newlines
// (White_Space, the lookahead) and repeated.
const kProbeTemplate = "{c}'s {c}1{c}a{c}{c}  {c}\n{c}";
function exhaustiveProbe(cp) {
  return kProbeTemplate.replaceAll('{c}', String.fromCodePoint(cp));
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const root = path.resolve(args.tiktoken);
  const { get_encoding } = createRequire(path.join(root, 'package.json'))('tiktoken');
  const packageJson = path.join(root, 'node_modules', 'tiktoken', 'package.json');
  const version = JSON.parse(fs.readFileSync(packageJson, 'utf8')).version;
  const enc = get_encoding('gpt2');
  const encode = (text, allowSpecial) =>
    Array.from(allowSpecial ? enc.encode(text, 'all') : enc.encode_ordinary(text));

  if (args.exhaustive) {
    const chunks = [];
    for (let cp = 0; cp <= 0x10ffff; ++cp) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const ids = encode(exhaustiveProbe(cp), false);
      const rec = new Uint32Array(ids.length + 1);
      rec[0] = ids.length;
      rec.set(ids, 1);
      chunks.push(Buffer.from(rec.buffer));
    }
    fs.writeFileSync(args.exhaustive, Buffer.concat(chunks));
    enc.free();
    return;
  }

  const lines = [];
  lines.push('{');
  lines.push(`  "generator": "tests/data/tiktoken_golden.mjs",`);
  lines.push(`  "tiktoken_version": ${JSON.stringify(version)},`);
  lines.push(`  "encoding": "gpt2",`);
  lines.push(`  "exhaustive_probe": ${JSON.stringify(kProbeTemplate)},`);
  lines.push('  "corpora": [');
  args.corpora.forEach((file, i) => {
    const bytes = fs.readFileSync(file);
    const ids = encode(bytes.toString('utf8'), false);
    const entry = {
      file: path.basename(file), bytes: bytes.length, bytes_fnv1a64: fnv1a64(bytes),
      tokens: ids.length, ids_fnv1a64: idsHash(ids),
    };
    lines.push(`    ${JSON.stringify(entry)}${i + 1 < args.corpora.length ? ',' : ''}`);
  });
  lines.push('  ],');
  lines.push('  "cases": [');
  kCases.forEach(([text, allowSpecial], i) => {
    const entry = { text, allow_special: allowSpecial, ids: encode(text, allowSpecial) };
    lines.push(`    ${JSON.stringify(entry)}${i + 1 < kCases.length ? ',' : ''}`);
  });
  lines.push('  ]');
  lines.push('}');
  process.stdout.write(lines.join('\n') + '\n');
  enc.free();
}

// Run as a script, not when imported.
if (import.meta.url === pathToFileURL(process.argv[1]).href) main();
