#!/usr/bin/env python3
"""Writes the seed corpus of each fuzz target (fuzz/corpus/<target>/seed_*) from the inputs the
unit tests use, so that the corpus can be regenerated and reviewed. Regression inputs (inputs a
target once crashed on) are committed beside them as crash_* files and are not touched here.

Usage: fuzz/make_seeds.py   (from anywhere; writes into fuzz/corpus/)
"""
import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = HERE / "corpus"


def write(target: str, name: str, data) -> None:
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed_{name}").write_bytes(data.encode() if isinstance(data, str) else data)


# ---- safetensors (tests/checkpoint/safetensors_test.cc) ----
def safetensors(header: str, data: bytes = b"") -> bytes:
    h = header.encode()
    return struct.pack("<Q", len(h)) + h + data


f32x2 = '"dtype":"F32","shape":[2]'
write("safetensors_fuzz", "valid_one", safetensors('{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}',
                                                    bytes(range(24))))
write("safetensors_fuzz", "valid_metadata", safetensors(
    '{"__metadata__":{"framework":"pt","step":"100"},"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},'
    '"b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]},"c":{"dtype":"F16","shape":[0,3],"data_offsets":[16,16]}}',
    bytes(16)))
write("safetensors_fuzz", "valid_all_dtypes", safetensors(
    '{"f64":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"i32":{"dtype":"I32","shape":[1],"data_offsets":[8,12]},'
    '"u16":{"dtype":"U16","shape":[2],"data_offsets":[12,16]},"u8":{"dtype":"U8","shape":[2],"data_offsets":[16,18]},'
    '"b":{"dtype":"BOOL","shape":[],"data_offsets":[18,19]},"f8":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[19,20]}}',
    bytes(20)))
write("safetensors_fuzz", "empty", safetensors("{}" + " " * 6))
write("safetensors_fuzz", "duplicate", safetensors('{"a":{' + f32x2 + ',"data_offsets":[0,8]},"a":{' + f32x2 +
                                                   ',"data_offsets":[8,16]}}', bytes(16)))
write("safetensors_fuzz", "bad_offsets", safetensors('{"a":{' + f32x2 + ',"data_offsets":[4,12]}}', bytes(12)))
write("safetensors_fuzz", "huge_shape", safetensors(
    '{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}}', bytes(4)))
write("safetensors_fuzz", "metadata_not_string", safetensors('{"__metadata__":{"step":100}}'))

# ---- manifests (tests/checkpoint/manifest_test.cc) ----
manifest = {
    "format": "trident-checkpoint", "version": 1, "name": "step_000001", "metadata": {"step": "1"},
    "files": [{"name": "model.safetensors", "size": 64, "crc32c": "e3069283"},
              {"name": "opt.safetensors", "size": 32, "crc32c": "abcdef01"}],
    "tensors": {
        "m": {"dtype": "F32", "shape": [4], "shards": [{"file": "opt.safetensors", "key": "m.0", "flat_range": [0, 4]}]},
        "w": {"dtype": "BF16", "shape": [2, 3],
              "shards": [{"file": "model.safetensors", "key": "w", "offsets": [0, 0], "shape": [2, 3]}]},
        "t": {"dtype": "F32", "shape": [4, 2],
              "shards": [{"file": "model.safetensors", "key": "t.0", "offsets": [0, 0], "shape": [2, 2]},
                         {"file": "opt.safetensors", "key": "t.1", "offsets": [2, 0], "shape": [2, 2]}]}}}
write("manifest_fuzz", "valid", json.dumps(manifest, indent=1))
write("manifest_fuzz", "duplicate_key", '{"format": "trident-checkpoint", "format": "x"}')

# ---- token files (tests/data/token_file_test.cc) ----
write("token_file_fuzz", "uint16", struct.pack("<8H", 0, 1, 2, 50256, 7, 8, 9, 10))
write("token_file_fuzz", "uint32", b"TRITOK32" + struct.pack("<Q", 3) + struct.pack("<3I", 1, 128000, 151935))
write("token_file_fuzz", "uint32_cut", b"TRITOK32" + struct.pack("<Q", 4) + struct.pack("<3I", 1, 2, 3))
write("token_file_fuzz", "odd", b"\x01\x02\x03")

# ---- tiktoken rank files (tests/data/tiktoken_ranks_test.cc tiny_rank_file) ----
DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def tiny_rank_file(extra):
    out = "".join(f"{DIGITS[b >> 2]}{DIGITS[(b & 3) << 4]}== {b}\n" for b in range(256))
    return out + "".join(f"{t} {256 + i}\n" for i, t in enumerate(extra))


write("tiktoken_ranks_fuzz", "tiny", tiny_rank_file(["aGU=", "aGVs", "bGw=", "aGVsbG8="]))
write("tiktoken_ranks_fuzz", "bad_line", tiny_rank_file(["aGV 256"]))

# ---- GPT-2 vocab.json NUL merges.txt (tests/data/test_data.h tiny_vocab) ----
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


B2U = bytes_to_unicode()


def sym(s: bytes) -> str:
    return "".join(B2U[b] for b in s)


def tiny_vocab(merges):
    vocab = {sym(bytes([b])): b for b in range(256)}
    lines = ["#version: 0.2"]
    for left, right in merges:
        vocab[sym(left + right)] = len(vocab)
        lines.append(f"{sym(left)} {sym(right)}")
    vocab["<|endoftext|>"] = len(vocab)
    return json.dumps(vocab, ensure_ascii=False) + "\0" + "\n".join(lines) + "\n"


write("gpt2_vocab_fuzz", "tiny", tiny_vocab([(b"h", b"e"), (b"l", b"l"), (b"he", b"ll"), (b" ", b"w"), (b"hell", b"o")]))
write("gpt2_vocab_fuzz", "escapes", '{"\\u0041": 0, "a\\n": 1}\0#version: 0.2\n')

# ---- tokenizer.json (tests/data/hf_tokenizer/tokenizer.json) [NUL tokenizer_config.json] ----
tok = (ROOT / "tests/data/hf_tokenizer/tokenizer.json").read_text()
write("hf_tokenizer_json_fuzz", "qwen_like", tok)
write("hf_tokenizer_json_fuzz", "with_config", tok + "\0" + '{"eos_token": "<|im_end|>", "bos_token": null}')
gpt2_style = json.loads(tok)
gpt2_style["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
gpt2_style["model"]["ignore_merges"] = False
gpt2_style["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m for m in gpt2_style["model"]["merges"]]
write("hf_tokenizer_json_fuzz", "gpt2_like_pair_merges", json.dumps(gpt2_style, ensure_ascii=False))

# ---- TOML configs (configs/*.toml, tests/config) ----
for p in sorted((ROOT / "configs").glob("*.toml")):
    write("config_toml_fuzz", p.stem, p.read_text())
write("config_toml_fuzz", "llama_and_alerts", """[model]
arch = "llama"
n_layer = 2
n_kv_head = 2
[train]
max_runtime = "1h30m"
[[alerts]]
name = "spike"
""")
write("config_toml_fuzz", "overrides", "model.arch=llama\ntrain.steps=10\noptim.lr=1e-3\ndata.sampler=sequential\n")

# ---- Hugging Face config.json (tests/train/hf_model_dir_test.cc) ----
llama = ('{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32, '
         '"intermediate_size": 48, "max_position_embeddings": 16, "vocab_size": 64')
write("hf_config_fuzz", "llama3_scaling", llama + ', "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", '
      '"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}')
write("hf_config_fuzz", "mistral_window", llama.replace("llama", "mistral") + ', "sliding_window": 8}')
write("hf_config_fuzz", "qwen2_window", llama.replace("llama", "qwen2") +
      ', "use_sliding_window": true, "max_window_layers": 2, "tie_word_embeddings": true}')
write("hf_config_fuzz", "gpt2", '{"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 16, "n_positions": 32, '
      '"vocab_size": 100, "layer_norm_epsilon": 1e-5}')
write("hf_config_fuzz", "t5", '{"model_type": "t5"}')

# ---- model.safetensors.index.json (tests/train/hf_model_dir_test.cc) ----
s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
write("hf_index_fuzz", "two_shards", json.dumps({"metadata": {"total_size": 64}, "weight_map": {"a": s1, "b": s2, "c": s1}}))
write("hf_index_fuzz", "missing_shard", '{"weight_map": {"a": "model-00003-of-00003.safetensors"}}')
write("hf_index_fuzz", "not_string", '{"weight_map": {"a": 5}}')

# ---- HTTP requests (tests/monitor/http_server_test.cc) ----
AUTH = "Authorization: Bearer fuzz-token\r\n"
write("http_request_fuzz", "get_metrics", "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
write("http_request_fuzz", "get_status_keepalive", "GET /status HTTP/1.1\r\nHost: x\r\n\r\nGET /status HTTP/1.1\r\n\r\n")
write("http_request_fuzz", "post_pause", "POST /pause HTTP/1.1\r\nHost: x\r\n" + AUTH +
      'Content-Type: application/json\r\nContent-Length: 19\r\n\r\n{"reason": "fuzz!"}')
write("http_request_fuzz", "post_bad_token", "POST /stop HTTP/1.1\r\nAuthorization: Bearer nope\r\nContent-Length: 0\r\n\r\n")
write("http_request_fuzz", "post_chunked", "POST /checkpoint HTTP/1.1\r\n" + AUTH +
      "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
write("http_request_fuzz", "post_too_large", "POST /resume HTTP/1.1\r\n" + AUTH + "Content-Length: 5000\r\n\r\n" + "x" * 5000)
write("http_request_fuzz", "bad_method", "BREW /metrics HTTP/1.1\r\n\r\n")
write("http_request_fuzz", "range", "GET /metrics HTTP/1.1\r\nRange: bytes=0-5,10-\r\n\r\n")

# ---- metrics.jsonl and alerts.jsonl (tests/train/metrics_test.cc, run_folder_test.py) ----
# The first byte is the step a resumed run reconciles to.
STEP = '{"step": %d, "loss": %s, "lr": 6e-04, "grad_norm": 1.5, "tokens_per_s": 1000.0, "elapsed_s": %s}\n'
steps = "".join(STEP % (s, 5.0 - 0.1 * s, 0.1 * s) for s in range(1, 13))
evals = '{"step": 4, "val_loss": 4.5}\n{"step": 8, "val_loss": 4.1}\n'
write("metrics_jsonl_fuzz", "whole_run", bytes([12]) + steps.encode() + evals.encode())
write("metrics_jsonl_fuzz", "torn_last_line", bytes([10]) + steps.encode()[:-20])
write("metrics_jsonl_fuzz", "torn_then_resumed", bytes([5]) + steps.encode()[:-20] + (STEP % (6, 4.4, 0.6)).encode())
write("metrics_jsonl_fuzz", "rollback", bytes([8]) + steps.encode() +
      b'{"step": 12, "rollback": {"from_step": 12, "to_step": 10, "skip": 2}}\n' + (STEP % (11, 3.9, 1.3)).encode())
write("metrics_jsonl_fuzz", "alert_event", bytes([3]) +
      b'{"time": "2026-11-29T00:00:00Z", "rule": "flat", "condition": "plateau", "step": 8, "value": 4.1}\n')
write("metrics_jsonl_fuzz", "not_json", bytes([0]) + b"nan\n{}\n[1,2]\n{\"step\": -1}\n{\"step\": 1e999}\n")

# ---- instruction and chat data (tests/data/instruction_data_test.cc) ----
# The first byte picks the chat template (llama3, chatml, plain).
QA = '{"prompt": "Q: Are we not men?\\nA:", "completion": " We are Vaxen."}\n'
CHAT = ('{"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "2+2?"}, '
        '{"role": "assistant", "content": "4"}]}\n')
write("instruction_jsonl_fuzz", "prompt_completion", bytes([2]) + (QA * 3).encode())
write("instruction_jsonl_fuzz", "chat_llama3", bytes([0]) + (CHAT + "\n" + QA).encode())
write("instruction_jsonl_fuzz", "chat_chatml", bytes([1]) + CHAT.encode())
write("instruction_jsonl_fuzz", "bad_role", bytes([1]) + b'{"messages": [{"role": "bot", "content": "x"}]}\n')

# ---- PEFT adapter directories (tests/adapters/lora_test.cc): config NUL weights ----
PEFT_CONFIG = ('{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4, "lora_dropout": 0.05, '
               '"target_modules": ["q_proj", "v_proj"], "bias": "none", "use_rslora": false, "use_dora": false, '
               '"modules_to_save": null, "rank_pattern": {}, "alpha_pattern": {}, "fan_in_fan_out": false}')
PEFT_HEADER = ('{"__metadata__": {"format": "pt"}, '
               '"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": '
               '{"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32]}}')
write("peft_adapter_fuzz", "adapter", PEFT_CONFIG.encode() + b"\0" + safetensors(PEFT_HEADER, bytes(32)))
write("peft_adapter_fuzz", "regex_targets", PEFT_CONFIG.replace('["q_proj", "v_proj"]', '".*\\\\.(q|v)_proj"').encode() +
      b"\0" + safetensors(PEFT_HEADER, bytes(32)))
write("peft_adapter_fuzz", "dora", PEFT_CONFIG.replace('"use_dora": false', '"use_dora": true').encode() + b"\0")
