// `trident serve` driven by OpenAI's own Node client (the npm package openai, pinned by
// tests/serve/openai_client/package-lock.json): run by openai_client_test.py, which trains the
// tiny byte-level model and starts the server. Checks, each through the client's own calls:
//   - /v1/models lists the model;
//   - completions and chat completions, plain and streamed: a stream's text equals the plain
//     answer, and the usage is right (the byte tokenizer: a prompt's tokens are its bytes; the
//     plain chat template's rendering; completion tokens = max_tokens when the finish is
//     "length", else at most it, and the answer's bytes when it is ASCII);
//   - 8 concurrent greedy requests (half plain, half streamed) each get what they get alone, and
//     /metrics' trident_serve_batch_size shows engine steps of more than one request;
//   - errors the client raises: a field of the wrong type, too many tokens, an oversized body,
//     an unknown model: a 4xx naming the field (err.param, and the message); malformed JSON (which
//     the client cannot send) through fetch;
//   - a stream aborted by an AbortController after its first chunks frees its slot: the engine
//     still held it (trident_serve_cancelled_total + 1), the running gauge returns to 0, and the
//     next requests are answered.
// Prints one line per failure; exits 1 on any.
//
//   node openai_client_test.mjs --base http://127.0.0.1:PORT --model NAME --client DIR
//        --max-body BYTES --context TOKENS
import { createRequire } from 'node:module';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    base: { type: 'string' }, model: { type: 'string' }, client: { type: 'string' },
    'max-body': { type: 'string' }, context: { type: 'string' },
  },
});
const require = createRequire(path.join(path.resolve(args.client), 'package.json'));
const { OpenAI } = require('openai');
const model = args.model;
const maxBody = Number(args['max-body']);
const context = Number(args.context);
// No retries: a refused request must surface as the server answered it.
const client = new OpenAI({ baseURL: `${args.base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });

const failures = [];
function check(ok, what) {
  if (!ok) failures.push(what);
}
const show = (x) => JSON.stringify(x);
const isAscii = (s) => /^[\x00-\x7f]*$/.test(s);

// Prometheus text: the value of `series` (a full name with labels), or NaN.
async function metric(series) {
  const text = await (await fetch(`${args.base}/metrics`)).text();
  for (const line of text.split('\n')) {
    if (line.startsWith(series + ' ')) return Number(line.slice(series.length + 1));
  }
  return NaN;
}

// Completion tokens agree with the finish reason and, for ASCII text, with its bytes (the
// byte tokenizer: one token a byte).
function checkCompletionTokens(what, usage, text, finish, maxTokens) {
  const n = usage?.completion_tokens;
  check(finish === 'length' ? n === maxTokens : n <= maxTokens, `${what}: ${n} completion tokens, finish ${finish}, max ${maxTokens}`);
  if (isAscii(text)) check(n === Buffer.byteLength(text), `${what}: ${n} completion tokens for ${Buffer.byteLength(text)} bytes of ${show(text)}`);
  check(usage?.total_tokens === usage?.prompt_tokens + n, `${what}: total_tokens in ${show(usage)}`);
}

async function completion(prompt, extra = {}) {
  const r = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, ...extra });
  return { text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage };
}

async function streamedCompletion(prompt, extra = {}) {
  const s = await client.completions.create({
    model, prompt, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true }, ...extra,
  });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of s) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage };
}

// 1. The model list.
const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === model, `models.list: ${show(models.data)}`);

// 2. Completions, plain and streamed.
const prompt = 'line 3 says';
const plain = await completion(prompt);
check(plain.usage.prompt_tokens === Buffer.byteLength(prompt), `completion usage ${show(plain.usage)} for ${show(prompt)}`);
checkCompletionTokens('completion', plain.usage, plain.text, plain.finish, 24);
const streamed = await streamedCompletion(prompt);
check(streamed.text === plain.text, `streamed completion ${show(streamed.text)} vs plain ${show(plain.text)}`);
check(streamed.finish === plain.finish, `streamed finish ${streamed.finish} vs plain ${plain.finish}`);
check(show(streamed.usage) === show(plain.usage), `streamed usage ${show(streamed.usage)} vs plain ${show(plain.usage)}`);

// 3. Chat completions, plain and streamed. The plain template renders "### ROLE\nCONTENT\n\n"
// per message, then "### assistant\n".
const messages = [{ role: 'user', content: 'line 1 says' }];
const rendered = '### user\nline 1 says\n\n### assistant\n';
const chat = await client.chat.completions.create({ model, messages, max_tokens: 32, temperature: 0 });
const answer = chat.choices[0].message;
check(chat.object === 'chat.completion' && answer.role === 'assistant' && typeof answer.content === 'string',
  `chat: ${show(chat)}`);
check(chat.usage.prompt_tokens === Buffer.byteLength(rendered), `chat usage ${show(chat.usage)} for ${show(rendered)}`);
checkCompletionTokens('chat', chat.usage, answer.content, chat.choices[0].finish_reason, 32);
{
  const s = await client.chat.completions.create({
    model, messages, max_tokens: 32, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let role = null;
  let finish = null;
  let usage = null;
  for await (const chunk of s) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role && role === null) role = c.delta.role;
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(role === 'assistant', `streamed chat: role ${role}`);
  check(text === answer.content, `streamed chat ${show(text)} vs plain ${show(answer.content)}`);
  check(finish === chat.choices[0].finish_reason, `streamed chat finish ${finish} vs ${chat.choices[0].finish_reason}`);
  check(show(usage) === show(chat.usage), `streamed chat usage ${show(usage)} vs plain ${show(chat.usage)}`);
}

// 4. 8 concurrent greedy requests: each gets what it gets alone, and they were batched.
const prompts = Array.from({ length: 8 }, (_, i) => `line ${i + 10} says`);
const alone = [];
for (const p of prompts) alone.push((await completion(p)).text);
const batchSeries = 'trident_serve_batch_size';
const multiBefore = (await metric(`${batchSeries}_count`)) - (await metric(`${batchSeries}_bucket{le="1"}`));
const together = await Promise.all(prompts.map((p, i) => (i % 2 ? streamedCompletion(p) : completion(p))));
const multiAfter = (await metric(`${batchSeries}_count`)) - (await metric(`${batchSeries}_bucket{le="1"}`));
for (let i = 0; i < prompts.length; ++i)
  check(together[i].text === alone[i], `prompt ${i} (${i % 2 ? 'streamed' : 'plain'}) at once: ${show(together[i].text)} alone: ${show(alone[i])}`);
check(new Set(alone).size > 1, `every prompt gives the same text, so the comparison shows nothing: ${show(alone)}`);
check(multiAfter - multiBefore > 0,
  `no engine step with more than one request while 8 ran at once (${batchSeries} steps over 1: ${multiBefore} -> ${multiAfter})`);
const fullBatch = (await metric(`${batchSeries}_count`)) - (await metric(`${batchSeries}_bucket{le="4"}`));
console.log(`8 at once: ${multiAfter - multiBefore} engine steps of more than one request, ${fullBatch} of more than 4 (all time)`);

// 5. Errors, as the client raises them.
async function refused(what, call, status, field, says) {
  try {
    const r = await call();
    failures.push(`${what}: answered ${show(r).slice(0, 300)}, not ${status}`);
  } catch (e) {
    const ok = e instanceof OpenAI.APIError && e.status === status && e.param === field &&
      e.message.includes(says) && e.type !== undefined;
    check(ok, `${what}: ${e.constructor.name} ${e.status} param ${e.param} type ${e.type}: ${e.message} (want ${status}, ${field}, ${show(says)})`);
  }
}
const base = { model, prompt, max_tokens: 8 };
await refused('a string temperature', () => client.completions.create({ ...base, temperature: 'hot' }), 400,
  'temperature', "'temperature' is a string, not a number");
await refused('a number as messages', () => client.chat.completions.create({ model, messages: 7 }), 400,
  'messages', "'messages' is a number");
await refused('a string max_tokens', () => client.completions.create({ ...base, max_tokens: '8' }), 400,
  'max_tokens', "'max_tokens' is a string");
await refused('too many tokens', () => client.completions.create({ ...base, max_tokens: context * 10 }), 400,
  'max_tokens', `'max_tokens' is ${context * 10}`);
await refused('too many chat tokens', () => client.chat.completions.create({ model, messages, max_completion_tokens: context * 10 }), 400,
  'max_completion_tokens', `'max_completion_tokens' is ${context * 10}`);
await refused('too many chat tokens as max_tokens', () => client.chat.completions.create({ model, messages, max_tokens: context * 10 }), 400,
  'max_tokens', `'max_tokens' is ${context * 10}`);
await refused('an unknown model', () => client.completions.create({ ...base, model: 'gpt-9' }), 404, 'model',
  "the model 'gpt-9' does not exist");
{
  const big = { ...base, prompt: 'x'.repeat(maxBody + 100) };
  const bytes = Buffer.byteLength(JSON.stringify(big));
  try {
    await client.completions.create(big);
    failures.push(`a ${bytes}-byte body was answered`);
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === 413 && e.message.includes(`the body (${bytes} bytes)`) &&
      e.message.includes(`at most ${maxBody} bytes`), `a ${bytes}-byte body: ${e.constructor.name} ${e.status}: ${e.message}`);
  }
}
// Malformed JSON, which the client cannot send.
for (const [what, body, says] of [['malformed JSON', '{"model": ', 'not valid JSON'], ['a JSON array', '[1]', 'not a JSON object']]) {
  const r = await fetch(`${args.base}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  const j = await r.json().catch(() => null);
  check(r.status === 400 && j?.error?.message?.includes(says) && j.error.type === 'invalid_request_error',
    `${what}: ${r.status} ${show(j)}`);
}

// 6. A stream aborted after its first chunks: its slot is freed while the engine still held
// it, and the next requests are answered. Long enough (the whole context) that the engine is
// still generating when the abort arrives.
{
  const cancelledBefore = await metric('trident_serve_cancelled_total');
  const controller = new AbortController();
  const s = await client.completions.create(
    { model, prompt, max_tokens: context - Buffer.byteLength(prompt), temperature: 1, seed: 1, stream: true },
    { signal: controller.signal });
  // The client's stream ends quietly on an abort (chunks already received may still come).
  let chunks = 0;
  let finish = null;
  try {
    for await (const chunk of s) {
      finish ??= chunk.choices[0]?.finish_reason;
      if (++chunks === 2) controller.abort();
    }
  } catch (e) {
    if (!(e instanceof OpenAI.APIUserAbortError)) failures.push(`the aborted stream threw ${e.constructor.name}: ${e.message}`);
  }
  check(controller.signal.aborted && !finish, `the stream ended with finish ${finish} after ${chunks} chunks, not aborted`);
  let running = NaN;
  let cancelled = NaN;
  for (let i = 0; i < 200; ++i) {
    running = await metric('trident_serve_running_requests');
    cancelled = await metric('trident_serve_cancelled_total');
    if (running === 0 && cancelled === cancelledBefore + 1) break;
    await new Promise((done) => setTimeout(done, 25));
  }
  check(running === 0, `the running gauge is ${running} after the abort, not 0`);
  check(cancelled === cancelledBefore + 1, `trident_serve_cancelled_total ${cancelledBefore} -> ${cancelled} after the abort`);
  const after = await Promise.all([completion(prompt), streamedCompletion(prompt)]);
  check(after[0].text === plain.text && after[1].text === plain.text,
    `after the abort: ${show(after.map((a) => a.text))} vs ${show(plain.text)}`);
  check((await metric('trident_serve_running_requests')) === 0, 'requests still run at the end');
}

for (const f of failures) console.log(`FAIL: ${f}`);
console.log(failures.length ? `${failures.length} failure(s)` : 'openai client: all checks passed');
process.exit(failures.length ? 1 : 0);
