"""A quantized engine through inflight-server: inflight-build --qformat int4_wo quantizes make_checkpoint's
Llama; this test dequantizes the engine's rank file itself (from the layout docs/engine_format.md describes:
two 4-bit codes a byte, low nibble first, implicit zero point 8, fp32 scales per group), writes a float
checkpoint holding those values, builds it, and serves both engines from one model repository on the CPU
runner: the greedy tokens must be equal, since both compute the same fp32 products from the same weights."""
import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

import inflight_client as ic

SUBS = ("triton_backend:inflight,triton_max_batch_size:8,decoupled_mode:False,max_beam_width:1,"
        "engine_dir:{engine},max_tokens_in_paged_kv_cache:2048,kv_cache_free_gpu_mem_fraction:0.5,"
        "exclude_input_in_output:True,enable_kv_cache_reuse:False,batching_strategy:inflight_fused_batching,"
        "max_queue_delay_microseconds:0,encoder_input_features_data_type:TYPE_FP16,logits_datatype:TYPE_FP32,"
        "device:cpu")
CHECKPOINT = ["--arch", "llama", "--hidden_size", "64", "--num_layers", "2", "--num_heads", "4",
              "--num_kv_heads", "2", "--intermediate_size", "128", "--vocab_size", "300",
              "--max_position_embeddings", "256", "--dtype", "float32", "--init_std", "0.3", "--seed", "31"]
PROMPTS = [[5, 17, 250, 3, 99, 42, 7], [1, 2, 3], [200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210]]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {name: (t["dtype"], t["shape"], data[t["data_offsets"][0]:t["data_offsets"][1]])
            for name, t in header.items()}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def floats(blob):
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def dequantize_int4(tensors, linear, group_size):
    """[rows, cols] row-major values of an int4_wo linear, as float32 bytes."""
    _, (rows, half), packed = tensors[linear + ".weight"]
    _, scale_shape, scale_blob = tensors[linear + ".weight_scale"]
    scales = floats(scale_blob)
    groups = scale_shape[1]
    cols = 2 * half
    out = []
    for r in range(rows):
        for c in range(cols):
            code = (packed[r * half + c // 2] >> (4 * (c % 2))) & 15
            out.append((code - 8) * scales[r * groups + c // group_size])
    return rows, cols, out


def pack(values):
    return struct.pack(f"<{len(values)}f", *values)


class QuantizedEngineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bin = ic.env_or_skip("INFLIGHT_TOOLS_DIR")
        cls.backends = ic.env_or_skip("INFLIGHT_BACKEND_DIR")
        ic.env_or_skip("INFLIGHT_SERVER")
        cls.tmp = tempfile.mkdtemp(prefix="quantized_engine_")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_tool(self, *args):
        done = subprocess.run([os.path.join(self.bin, args[0]), *args[1:]], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stderr

    def test_int4_engine_serves_the_tokens_of_its_dequantized_float_model(self):
        ckpt, quant = os.path.join(self.tmp, "ckpt"), os.path.join(self.tmp, "int4")
        self.run_tool("make_checkpoint", *CHECKPOINT, "--output_dir", ckpt)
        log = self.run_tool("inflight-build", "--checkpoint_dir", ckpt, "--output_dir", quant, "--max_batch_size", "8",
                            "--qformat", "int4_wo", "--group_size", "32")
        self.assertIn('"quant_algo":"int4_wo"', log)
        with open(os.path.join(quant, "config.json")) as f:
            config = json.load(f)
        q = config["quantization"]
        self.assertEqual((q["quant_algo"], q["group_size"], q["has_zero_point"]), ("int4_wo", 32, False))

        engine = read_safetensors(os.path.join(quant, "rank0.safetensors"))
        original = read_safetensors(os.path.join(ckpt, "model.safetensors"))
        hd, nq, nkv = config["head_dim"], config["num_attention_heads"], config["num_kv_heads"]
        inter = config["intermediate_size"]
        tensors = dict(original)
        for i in range(config["num_layers"]):
            hf = f"model.layers.{i}."
            rows, cols, qkv = dequantize_int4(engine, f"layers.{i}.qkv", 32)
            q_end, k_end = nq * hd * cols, (nq + nkv) * hd * cols
            for name, part, n in (("q_proj", qkv[:q_end], nq * hd), ("k_proj", qkv[q_end:k_end], nkv * hd),
                                  ("v_proj", qkv[k_end:], nkv * hd)):
                tensors[hf + f"self_attn.{name}.weight"] = ("F32", [n, cols], pack(part))
            rows, cols, out = dequantize_int4(engine, f"layers.{i}.attn_out", 32)
            tensors[hf + "self_attn.o_proj.weight"] = ("F32", [rows, cols], pack(out))
            rows, cols, gate_up = dequantize_int4(engine, f"layers.{i}.gate_up", 32)
            tensors[hf + "mlp.gate_proj.weight"] = ("F32", [inter, cols], pack(gate_up[:inter * cols]))
            tensors[hf + "mlp.up_proj.weight"] = ("F32", [inter, cols], pack(gate_up[inter * cols:]))
            rows, cols, down = dequantize_int4(engine, f"layers.{i}.down", 32)
            tensors[hf + "mlp.down_proj.weight"] = ("F32", [rows, cols], pack(down))
        for name in tensors:
            if name.endswith("_proj.weight"):
                self.assertNotEqual(tensors[name][2], original[name][2], name)  # really quantized
        dequant, reference = os.path.join(self.tmp, "dequant"), os.path.join(self.tmp, "reference")
        os.makedirs(dequant)
        for name in os.listdir(ckpt):
            if name != "model.safetensors":
                shutil.copy(os.path.join(ckpt, name), dequant)
        write_safetensors(os.path.join(dequant, "model.safetensors"), tensors)
        self.run_tool("inflight-build", "--checkpoint_dir", dequant, "--output_dir", reference, "--max_batch_size", "8")

        repo = os.path.join(self.tmp, "repo")
        ic.make_llm_model(repo, "llm_int4", SUBS.format(engine=quant))
        ic.make_llm_model(repo, "llm_reference", SUBS.format(engine=reference))
        with ic.InflightServer(model_repository=repo, backend_directory=self.backends, startup_timeout=120) as server:
            for prompt in PROMPTS:
                outputs = []
                for model in ("llm_int4", "llm_reference"):
                    status, out = ic.post_json(server.http_port, f"/v2/models/{model}/generate",
                                               {"input_ids": [prompt], "input_lengths": [len(prompt)],
                                                "request_output_len": [10]})
                    self.assertEqual(status, 200, out)
                    outputs.append(out["output_ids"])
                self.assertEqual(len(outputs[0]), 10)
                self.assertEqual(outputs[0], outputs[1], prompt)
            log = server.log()
        self.assertIn("int4_wo weights dequantized", log)


if __name__ == "__main__":
    unittest.main()
