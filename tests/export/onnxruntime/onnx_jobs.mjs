// Runs ONNX files written by `trident export --format onnx` in ONNX Runtime (onnxruntime-node,
// CPU) for trident's tests. Reads a JSON list of jobs from the file named by the first argument
// and prints one JSON list of results, in order. Every job names the model and its cache shape:
//   {"model": F, "layers": L, "kv_heads": KV, "head_dim": D, "position_ids": bool, ...}
//   {"op": "logits", "ids": [[..], ..], "split": K, "pad": P}
//       -> {"full": [..], "cached": [..], "padded": [..]}: the logits (batch, T, vocab) flattened,
//          of one call with an empty past, and of two calls, the first K tokens then the rest with
//          the first call's present.N.* fed back as past_key_values.N.*; with "pad" (models with
//          position_ids), of one call with each row after P pad tokens that attention_mask hides
//          (their logits dropped)
//   {"op": "greedy", "ids": [..], "tokens": N}
//       -> {"ids": [..]}: N tokens, argmax each, one token per call after the prompt, the cache
//          carried from call to call
//   {"op": "nll", "windows": [[..], ..]}
//       -> {"nll": sum, "tokens": n}: each window of T + 1 ids in one call, the negative log
//          likelihood (natural log) of ids[1..T] given the ones before
// A job that fails gives {"error": message}; the process still answers the rest.
//
//   node onnx_jobs.mjs JOBS.json --tools DIR
// DIR holds node_modules/onnxruntime-node (scripts/install-npm-tool.sh tests/export/onnxruntime DIR).
import {createRequire} from "node:module";
import path from "node:path";

import {answerJobs, option, readJobs} from "../node_jobs.mjs";

const jobs = readJobs();
const require = createRequire(path.join(path.resolve(option("--tools", ".")), "node_modules", "x.js"));
const ort = require("onnxruntime-node");
const sessions = new Map();

async function session(file) {
  if (!sessions.has(file)) {
    sessions.set(file, await ort.InferenceSession.create(file, {executionProviders: ["cpu"], intraOpNumThreads: 1}));
  }
  return sessions.get(file);
}

const int64 = (rows) => new ort.Tensor("int64", BigInt64Array.from(rows.flat().map(BigInt)), [rows.length, rows[0].length]);

// One call: `rows` of new ids after `past` (null: empty) -> {logits, present}. The first `pad`
// ids of each row are padding: masked out, and the positions start after them.
async function step(s, job, rows, past, pad = 0) {
  const B = rows.length, T = rows[0].length;
  const pastLen = past ? past["past_key_values.0.key"].dims[2] : 0;
  const feeds = {
    input_ids: int64(rows),
    attention_mask: int64(rows.map(() => Array.from({length: pastLen + T}, (_, j) => (j < pad ? 0 : 1)))),
  };
  if (job.position_ids) {
    feeds.position_ids = int64(rows.map(() => Array.from({length: T}, (_, t) => Math.max(0, pastLen + t - pad))));
  }
  for (let l = 0; l < job.layers; ++l) {
    for (const kv of ["key", "value"]) {
      const name = `past_key_values.${l}.${kv}`;
      feeds[name] = past ? past[name] : new ort.Tensor("float32", new Float32Array(0), [B, job.kv_heads, 0, job.head_dim]);
    }
  }
  const out = await s.run(feeds);
  const present = {};
  for (let l = 0; l < job.layers; ++l) {
    for (const kv of ["key", "value"]) present[`past_key_values.${l}.${kv}`] = out[`present.${l}.${kv}`];
  }
  return {logits: out.logits, present};
}

function argmaxLast(logits) {
  const [, T, V] = logits.dims;
  const row = logits.data.subarray((T - 1) * V, T * V);
  let best = 0;
  for (let v = 1; v < V; ++v) if (row[v] > row[best]) best = v;
  return best;
}

async function run(job) {
  const s = await session(job.model);
  if (job.op === "logits") {
    const full = await step(s, job, job.ids, null);
    const first = await step(s, job, job.ids.map((r) => r.slice(0, job.split)), null);
    const rest = await step(s, job, job.ids.map((r) => r.slice(job.split)), first.present);
    // (B, K, V) and (B, T-K, V) interleaved back into (B, T, V).
    const [B, K, V] = first.logits.dims, R = rest.logits.dims[1];
    const cached = [];
    for (let b = 0; b < B; ++b) {
      cached.push(...first.logits.data.subarray(b * K * V, (b + 1) * K * V));
      cached.push(...rest.logits.data.subarray(b * R * V, (b + 1) * R * V));
    }
    const result = {full: Array.from(full.logits.data), cached};
    if (job.pad) {
      const padded = await step(s, job, job.ids.map((r) => new Array(job.pad).fill(0).concat(r)), null, job.pad);
      const P = job.pad, T = P + job.ids[0].length;
      result.padded = [];
      for (let b = 0; b < B; ++b) result.padded.push(...padded.logits.data.subarray((b * T + P) * V, (b + 1) * T * V));
    }
    return result;
  }
  if (job.op === "greedy") {
    let {logits, present} = await step(s, job, [job.ids], null);
    const ids = [];
    for (let i = 0; i < job.tokens; ++i) {
      ids.push(argmaxLast(logits));
      if (i + 1 < job.tokens) ({logits, present} = await step(s, job, [[ids[ids.length - 1]]], present));
    }
    return {ids};
  }
  if (job.op === "nll") {
    let nll = 0, tokens = 0;
    for (const w of job.windows) {
      const {logits} = await step(s, job, [w.slice(0, -1)], null);
      const [, T, V] = logits.dims;
      for (let t = 0; t < T; ++t) {
        const row = logits.data.subarray(t * V, (t + 1) * V);
        let max = -Infinity;
        for (const x of row) max = Math.max(max, x);
        let sum = 0;
        for (const x of row) sum += Math.exp(x - max);
        nll += Math.log(sum) + max - row[w[t + 1]];
        ++tokens;
      }
    }
    return {nll, tokens};
  }
  throw new Error(`unknown op ${job.op}`);
}

await answerJobs(jobs, run);
