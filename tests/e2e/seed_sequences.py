"""The deployment sequences of the user documents Inflight was started from, as the documents have
them: the shell lines (repository, fill_template.py commands), the server start line and the curl
requests, copied verbatim. test_seed_replay.py runs them against inflight-server and
tests/unit/tools/test_fill_template.py runs their fill commands against our templates.

The documents, and the NVIDIA README versions whose commands they carry:
  000  NVIDIA tensorrtllm_backend README, TensorRT-LLM v0.11.0 / Triton 24.07 (docs.nvidia.com page,
       Chinese translation): five fill_template.py commands, launch_triton_server.py, curls to
       ensemble and tensorrt_llm_bls, curl :8002/metrics.
  002  NVIDIA tensorrtllm_backend README of the v0.7 era (Triton 23.10-24.01 containers, Chinese
       translation): no fill_template.py; the config fields of a table are edited by hand, then
       launch_triton_server.py, curls to ensemble and tensorrt_llm_bls, curl :8002/metrics.
  004  A Qwen2 deployment post on the Triton 24.10 container (TensorRT-LLM v0.14): the README's
       fill commands, launch_triton_server.py or `mpirun -n 2 tritonserver --model-repo=...` on
       ports 18000-18002, a Chinese prompt with max_tokens 100, curl :18002/metrics; then a second
       repository ("opti") filled with more keys and started with mpirun.
"""

# ---- 000 -----------------------------------------------------------------------------------------
SEED_000_SETUP = r"""
mkdir /triton_model_repo
cp -r /app/all_models/inflight_batcher_llm/* /triton_model_repo/
ENGINE_DIR=/engines/gpt/fp16/4-gpu
TOKENIZER_DIR=/app/examples/gpt/gpt2
MODEL_FOLDER=/triton_model_repo
TRITON_MAX_BATCH_SIZE=4
INSTANCE_COUNT=1
MAX_QUEUE_DELAY_MS=0
MAX_QUEUE_SIZE=0
FILL_TEMPLATE_SCRIPT=/app/tools/fill_template.py
DECOUPLED_MODE=false
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/ensemble/config.pbtxt triton_max_batch_size:${TRITON_MAX_BATCH_SIZE}
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/preprocessing/config.pbtxt tokenizer_dir:${TOKENIZER_DIR},triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},preprocessing_instance_count:${INSTANCE_COUNT}
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/tensorrt_llm/config.pbtxt triton_backend:tensorrtllm,triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},decoupled_mode:${DECOUPLED_MODE},engine_dir:${ENGINE_DIR},max_queue_delay_microseconds:${MAX_QUEUE_DELAY_MS},batching_strategy:inflight_fused_batching,max_queue_size:${MAX_QUEUE_SIZE},encoder_input_features_data_type:TYPE_FP16
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/postprocessing/config.pbtxt tokenizer_dir:${TOKENIZER_DIR},triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},postprocessing_instance_count:${INSTANCE_COUNT},max_queue_size:${MAX_QUEUE_SIZE}
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/tensorrt_llm_bls/config.pbtxt triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},decoupled_mode:${DECOUPLED_MODE},bls_instance_count:${INSTANCE_COUNT}
"""
SEED_000_START = "python3 /app/scripts/launch_triton_server.py --world_size=4 --model_repo=${MODEL_FOLDER}"
README_CURL_ENSEMBLE = """curl -X POST localhost:8000/v2/models/ensemble/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}'"""
README_CURL_BLS = """curl -X POST localhost:8000/v2/models/tensorrt_llm_bls/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}'"""
README_CURL_METRICS = "curl localhost:8002/metrics"

# ---- 002 -----------------------------------------------------------------------------------------
SEED_002_SETUP = r"""
# Create the model repository that will be used by the Triton server
cd tensorrtllm_backend
mkdir triton_model_repo

# Copy the example models to the model repository
cp -r all_models/inflight_batcher_llm/* triton_model_repo/

# Copy the TRT engine to triton_model_repo/tensorrt_llm/1/
cp tensorrt_llm/examples/gpt/engines/fp16/4-gpu/* triton_model_repo/tensorrt_llm/1
"""
# "修改模型配置": the fields of the document's table, edited by hand, with the values it gives (for
# batch_scheduler_policy, "Mandatory", it names two; guaranteed_no_evict is taken). Fields marked
# optional with a default (decoupled, max_beam_width, ...) are left as they are.
SEED_002_HAND_EDITS = {
    "preprocessing": {"tokenizer_dir": "/tensorrtllm_backend/tensorrt_llm/examples/gpt/gpt2"},
    "tensorrt_llm": {"gpt_model_type": "inflight_fused_batching",
                     "gpt_model_path": "/tensorrtllm_backend/triton_model_repo/tensorrt_llm/1",
                     "batch_scheduler_policy": "guaranteed_no_evict"},
    "postprocessing": {"tokenizer_dir": "/tensorrtllm_backend/tensorrt_llm/examples/gpt/gpt2",
                       "tokenizer_type": "auto"},
}
SEED_002_START = r"""
cd /tensorrtllm_backend
# --world_size is the number of GPUs you want to use for serving
python3 scripts/launch_triton_server.py --world_size=4 --model_repo=/tensorrtllm_backend/triton_model_repo
"""

# ---- 004 -----------------------------------------------------------------------------------------
SEED_004_SETUP = r"""
mkdir -p /triton_model_repo/Qwen2-14B-Instruct-Int4-2Gpu 
cp -r /tensorrtllm_backend/all_models/inflight_batcher_llm/* /triton_model_repo/Qwen2-14B-Instruct-Int4-2Gpu 
ENGINE_DIR=/engines/trt_engines/Qwen2-14B-Instruct-Int4/weight_only/2-gpu/
TOKENIZER_DIR=/models/Qwen2-14B-Instruct/
MODEL_FOLDER=/triton_model_repo/Qwen2-14B-Instruct-Int4-2Gpu 
TRITON_MAX_BATCH_SIZE=4
INSTANCE_COUNT=1
MAX_QUEUE_DELAY_MS=0
MAX_QUEUE_SIZE=0
FILL_TEMPLATE_SCRIPT=/tensorrtllm_backend/tools/fill_template.py
DECOUPLED_MODE=false

python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/ensemble/config.pbtxt triton_max_batch_size:${TRITON_MAX_BATCH_SIZE}
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/preprocessing/config.pbtxt tokenizer_dir:${TOKENIZER_DIR},triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},preprocessing_instance_count:${INSTANCE_COUNT}
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/tensorrt_llm/config.pbtxt triton_backend:tensorrtllm,triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},decoupled_mode:${DECOUPLED_MODE},engine_dir:${ENGINE_DIR},max_queue_delay_microseconds:${MAX_QUEUE_DELAY_MS},batching_strategy:inflight_fused_batching,max_queue_size:${MAX_QUEUE_SIZE}
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/postprocessing/config.pbtxt tokenizer_dir:${TOKENIZER_DIR},triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},postprocessing_instance_count:${INSTANCE_COUNT},max_queue_size:${MAX_QUEUE_SIZE}
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/tensorrt_llm_bls/config.pbtxt triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},decoupled_mode:${DECOUPLED_MODE},bls_instance_count:${INSTANCE_COUNT}
"""
SEED_004_LAUNCHER_START = "python3 /tensorrtllm_backend/scripts/launch_triton_server.py --http_port=18000 --metrics_port=18002  --grpc_port=18001 --world_size=2 --model_repo=${MODEL_FOLDER}"
SEED_004_MPIRUN_START = "mpirun -n 2 --allow-run-as-root  tritonserver   --http-port=18000 --metrics-port=18002  --grpc-port=18001  --model-repo=${MODEL_FOLDER}"
SEED_004_CURL = """curl -X POST localhost:18000/v2/models/ensemble/generate -d '{"text_input": "你好，你叫什么名字", "max_tokens": 100, "bad_words": "", "stop_words": ""}'"""
SEED_004_CURL_METRICS = "curl localhost:18002/metrics"

SEED_004_OPTI_SETUP = r"""
mkdir -p /triton_model_repo/Qwen2-14B-Instruct-Int4-2Gpu-Opti

cp -r /tensorrtllm_backend/all_models/inflight_batcher_llm/* /triton_model_repo/Qwen2-14B-Instruct-Int4-2Gpu-Opti 



# 模型配置
# build模型存储路径
ENGINE_DIR=/engines/trt_engines/Qwen2-14B-Instruct-Int4/weight_only/2-gpu-opti/
TOKENIZER_DIR=/models/Qwen2-14B-Instruct/
# trt model repo仓库（四个模型文件路径）。模型仓库引用引擎模型地址。
MODEL_FOLDER=/triton_model_repo/Qwen2-14B-Instruct-Int4-2Gpu-Opti 
TRITON_MAX_BATCH_SIZE=64
INSTANCE_COUNT=1
MAX_QUEUE_DELAY_MS=0
MAX_QUEUE_SIZE=0
FILL_TEMPLATE_SCRIPT=/tensorrtllm_backend/tools/fill_template.py
DECOUPLED_MODE=false

# 新增
ACCUMULATE_TOKENS=true
MAX_BEAM_WIDTH=1
#MAX_TOKENS_IN_PAGED_KV_CACHE=${max_tokens_in_paged_kv_cache}
#MAX_ATTENTION_WINDOW_SIZE=${max_attention_windows_size}
#KV_CACHE_FREE_GPU_MEM_FRACTION=0.5
EXCLUDE_INPUT_IN_OUTPUT=true
ENABLE_KV_CACHE_REUSE=false


python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/ensemble/config.pbtxt triton_max_batch_size:${TRITON_MAX_BATCH_SIZE}
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/preprocessing/config.pbtxt tokenizer_dir:${TOKENIZER_DIR},triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},preprocessing_instance_count:${INSTANCE_COUNT}
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/postprocessing/config.pbtxt tokenizer_dir:${TOKENIZER_DIR},triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},postprocessing_instance_count:${INSTANCE_COUNT},max_queue_size:${MAX_QUEUE_SIZE}
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/tensorrt_llm_bls/config.pbtxt triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},decoupled_mode:${DECOUPLED_MODE},bls_instance_count:${INSTANCE_COUNT},accumulate_tokens:${ACCUMULATE_TOKENS}
python3 ${FILL_TEMPLATE_SCRIPT} -i ${MODEL_FOLDER}/tensorrt_llm/config.pbtxt triton_backend:tensorrtllm,triton_max_batch_size:${TRITON_MAX_BATCH_SIZE},decoupled_mode:${DECOUPLED_MODE},engine_dir:${ENGINE_DIR},max_queue_delay_microseconds:${MAX_QUEUE_DELAY_MS},batching_strategy:inflight_fused_batching,max_queue_size:${MAX_QUEUE_SIZE},max_beam_width:${MAX_BEAM_WIDTH},exclude_input_in_output:${EXCLUDE_INPUT_IN_OUTPUT},enable_kv_cache_reuse:${ENABLE_KV_CACHE_REUSE}
"""
SEED_004_OPTI_START = "mpirun -n 2 --allow-run-as-root  tritonserver   --http-port=18000 --metrics-port=18002  --grpc-port=18001  --model-repo=${MODEL_FOLDER}"


class Sequence:
    """One deployment as a document has it: set-up lines, hand edits (model -> parameter -> value),
    the start line, generate requests (curl lines) and the metrics request."""

    def __init__(self, name, setup, start, generate, metrics, hand_edits=None,
                 prompt_in_output=True):
        self.name = name
        self.setup = setup
        self.start = start
        self.generate = generate
        self.metrics = metrics
        self.hand_edits = hand_edits or {}
        # exclude_input_in_output is false unless the sequence fills it true.
        self.prompt_in_output = prompt_in_output


SEQUENCES = [
    Sequence("000", SEED_000_SETUP, SEED_000_START, [README_CURL_ENSEMBLE, README_CURL_BLS],
             README_CURL_METRICS),
    Sequence("002", SEED_002_SETUP, SEED_002_START, [README_CURL_ENSEMBLE, README_CURL_BLS],
             README_CURL_METRICS, hand_edits=SEED_002_HAND_EDITS),
    Sequence("004_launcher", SEED_004_SETUP, SEED_004_LAUNCHER_START, [SEED_004_CURL],
             SEED_004_CURL_METRICS),
    Sequence("004_mpirun", SEED_004_SETUP, SEED_004_MPIRUN_START, [SEED_004_CURL],
             SEED_004_CURL_METRICS),
    # The document's second repository sends no request of its own; its first one is sent again.
    Sequence("004_opti", SEED_004_OPTI_SETUP, SEED_004_OPTI_START, [SEED_004_CURL],
             SEED_004_CURL_METRICS, prompt_in_output=False),
]


def fill_commands(setup):
    """The fill_template.py lines of a set-up block."""
    return [line for line in setup.splitlines() if "${FILL_TEMPLATE_SCRIPT}" in line]
