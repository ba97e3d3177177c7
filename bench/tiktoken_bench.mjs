// OpenAI's tiktoken (the npm package `tiktoken`: tiktoken's Rust core compiled to WebAssembly)
// encoding a file on one thread: encode_ordinary, the median of R runs in process CPU time
// (the same measure as tokenizer_bench's Note [CPU time]). Prints JSON. tiktoken keeps no
// cache between calls, so every run is alike (its first run is reported apart, as "cold").
//
// Usage: node bench/tiktoken_bench.mjs --tiktoken DIR --file F [--encoding E]... [--reps R]
//   --tiktoken  a directory where `npm install tiktoken@1.0.22` was run
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const args = { tiktoken: null, file: null, encodings: [], reps: 5 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; ++i) {
  const value = argv[i + 1];
  if (value === undefined) throw new Error(`${argv[i]} needs a value`);
  if (argv[i] === '--tiktoken') args.tiktoken = value;
  else if (argv[i] === '--file') args.file = value;
  else if (argv[i] === '--encoding') args.encodings.push(value);
  else if (argv[i] === '--reps') args.reps = Math.max(1, Number.parseInt(value, 10));
  else throw new Error(`unknown argument ${argv[i]}`);
  ++i;
}
if (!args.tiktoken || !args.file) throw new Error('usage: --tiktoken DIR --file F [--encoding E]... [--reps R]');
if (args.encodings.length === 0) args.encodings = ['gpt2', 'cl100k_base', 'o200k_base'];

const root = path.resolve(args.tiktoken);
const { get_encoding } = createRequire(path.join(root, 'package.json'))('tiktoken');
const version = JSON.parse(fs.readFileSync(path.join(root, 'node_modules', 'tiktoken', 'package.json'), 'utf8')).version;
const text = fs.readFileSync(args.file).toString('utf8');
const bytes = Buffer.byteLength(text, 'utf8');
const cpuSeconds = (fn) => {
  const start = process.cpuUsage();
  fn();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
};
const out = { benchmark: 'tiktoken', tiktoken_npm_version: version, threads: 1, reps: args.reps,
              file: path.basename(args.file), bytes, results: {} };
for (const name of args.encodings) {
  const enc = get_encoding(name);
  let ids = null;
  const cold = cpuSeconds(() => { ids = enc.encode_ordinary(text); });
  const times = [];
  for (let r = 0; r < args.reps; ++r) times.push(cpuSeconds(() => { ids = enc.encode_ordinary(text); }));
  times.sort((a, b) => a - b);
  out.results[name] = { tokens: ids.length, encode_cold_mb_per_s: bytes / 1e6 / cold,
                        encode_mb_per_s: bytes / 1e6 / times[Math.floor(times.length / 2)] };
  enc.free();
}
process.stdout.write(JSON.stringify(out, null, 2) + '\n');
