# End-to-end tests of the LLM repository: tools/prepare_demo.sh makes a random-weight GPT-2 engine and fills
# all_models/inflight_batcher_llm with fill_template.py (once for default settings, once with a 10-block KV
# cache under max_utilization), then test_llm_ensemble.py and test_llm_repository.py talk to inflight-server.
# test_seed_replay.py replays the seed documents' deployments on that engine; test_install_prefix.py installs
# the build into a temporary prefix and serves from it.
if(NOT TARGET inflight-server OR NOT TARGET triton_inflight OR NOT TARGET triton_inflight_tokenizer
   OR NOT TARGET triton_inflight_bls OR NOT TARGET make_checkpoint OR NOT TARGET inflight-build)
  message(STATUS "e2e: the LLM tests need inflight-server, both backends and the model tools")
  return()
endif()

set(_llm_work ${PROJECT_BINARY_DIR}/e2e_llm)
set(_tokenizer ${PROJECT_SOURCE_DIR}/.testdata/gpt2)
add_test(NAME e2e_llm_prepare_repos
  COMMAND sh -c "set -e; t=\${INFLIGHT_TEST_DATA:+\$INFLIGHT_TEST_DATA/gpt2}; t=\${t:-$2}; \
\"$0\" \"$1\" \"$t\" \"$3/default\"; \
\"$0\" \"$1\" \"$t\" \"$3/tiny_kv\" max_tokens_in_paged_kv_cache:640,batch_scheduler_policy:max_utilization"
    ${PROJECT_SOURCE_DIR}/tools/prepare_demo.sh $<TARGET_FILE_DIR:make_checkpoint> ${_tokenizer} ${_llm_work})
set_tests_properties(e2e_llm_prepare_repos PROPERTIES
  FIXTURES_SETUP llm_repos FIXTURES_REQUIRED testdata LABELS e2e TIMEOUT 300)

set(_llm_env
  "INFLIGHT_SERVER=$<TARGET_FILE:inflight-server>"
  "INFLIGHT_BACKEND_DIR=${PROJECT_BINARY_DIR}/backends"
  "INFLIGHT_LLM_REPO=${_llm_work}/default/triton_model_repo"
  "INFLIGHT_LLM_TINY_KV_REPO=${_llm_work}/tiny_kv/triton_model_repo"
  "INFLIGHT_LLM_ENGINE=${_llm_work}/default/engine"
  "INFLIGHT_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
  "PYTHONDONTWRITEBYTECODE=1")
foreach(_test test_llm_ensemble test_llm_repository test_llm_observability test_llm_binary_http)
  add_test(NAME e2e_${_test}
    COMMAND ${Python3_EXECUTABLE} -m unittest -v ${_test}
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  set_tests_properties(e2e_${_test} PROPERTIES
    LABELS e2e TIMEOUT 600 ENVIRONMENT "${_llm_env}" FIXTURES_REQUIRED llm_repos)
endforeach()

# The HTTP layer under load (label soak; CI's size: 200 streams, 30% cut by their clients, 500 idle
# connections, 20 s): health stays fast, every request ends, every KV block comes back.
add_test(NAME e2e_test_http_soak
  COMMAND ${Python3_EXECUTABLE} -m unittest -v test_http_soak
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(e2e_test_http_soak PROPERTIES
  LABELS "e2e;soak" TIMEOUT 300 ENVIRONMENT "${_llm_env}" FIXTURES_REQUIRED llm_repos)

add_test(NAME e2e_test_seed_replay
  COMMAND ${Python3_EXECUTABLE} -m unittest -v test_seed_replay
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(e2e_test_seed_replay PROPERTIES
  LABELS e2e TIMEOUT 600 FIXTURES_REQUIRED llm_repos
  ENVIRONMENT "${_llm_env};INFLIGHT_LLM_CHECKPOINT=${_llm_work}/default/gpt2-random;INFLIGHT_BUILD_TOOL=$<TARGET_FILE:inflight-build>")
add_test(NAME e2e_test_install_prefix
  COMMAND ${Python3_EXECUTABLE} -m unittest -v test_install_prefix
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(e2e_test_install_prefix PROPERTIES
  LABELS e2e TIMEOUT 600 FIXTURES_REQUIRED llm_repos
  ENVIRONMENT "CMAKE_COMMAND=${CMAKE_COMMAND};INFLIGHT_BUILD_DIR=${PROJECT_BINARY_DIR};INFLIGHT_LLM_CHECKPOINT=${_llm_work}/default/gpt2-random;PYTHONDONTWRITEBYTECODE=1")

# A Hugging Face checkpoint folder as engine_dir: converted by the backend at load, cached, refused by name.
add_test(NAME e2e_test_hf_folder_engine
  COMMAND ${Python3_EXECUTABLE} -m unittest -v test_hf_folder_engine
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(e2e_test_hf_folder_engine PROPERTIES LABELS e2e TIMEOUT 600
  ENVIRONMENT "${_llm_env};INFLIGHT_TOOLS_DIR=$<TARGET_FILE_DIR:make_checkpoint>")

# A quantized engine (inflight-build --qformat int4_wo) served by inflight-server, against the float engine
# of its dequantized weights.
add_test(NAME e2e_test_quantized_engine
  COMMAND ${Python3_EXECUTABLE} -m unittest -v test_quantized_engine
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(e2e_test_quantized_engine PROPERTIES LABELS e2e TIMEOUT 600
  ENVIRONMENT "${_llm_env};INFLIGHT_TOOLS_DIR=$<TARGET_FILE_DIR:make_checkpoint>")

# The LLM repository over gRPC, with the requests NVIDIA's client scripts send (Python with Debian's
# grpcio; see CMakeLists.txt beside this file).
if(INFLIGHT_GRPC_PYTHON)
  add_test(NAME e2e_test_llm_grpc
    COMMAND ${INFLIGHT_GRPC_PYTHON} -m unittest -v test_llm_grpc
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  set_tests_properties(e2e_test_llm_grpc PROPERTIES
    LABELS e2e TIMEOUT 600 FIXTURES_REQUIRED "llm_repos;grpc_py"
    ENVIRONMENT "${_llm_env};INFLIGHT_GRPC_PY=${INFLIGHT_GRPC_PY_DIR}")
endif()

# tensorrt_llm_bls (the C++ BLS backend) against the ensemble, over HTTP and, where the Python that has
# Debian's grpcio runs it, over gRPC too.
if(INFLIGHT_GRPC_PYTHON)
  set(_bls_python ${INFLIGHT_GRPC_PYTHON})
  set(_bls_fixtures "llm_repos;grpc_py")
else()
  set(_bls_python ${Python3_EXECUTABLE})
  set(_bls_fixtures llm_repos)
endif()
add_test(NAME e2e_test_llm_bls
  COMMAND ${_bls_python} -m unittest -v test_llm_bls
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(e2e_test_llm_bls PROPERTIES
  LABELS e2e TIMEOUT 600 FIXTURES_REQUIRED "${_bls_fixtures}"
  ENVIRONMENT "${_llm_env};INFLIGHT_GRPC_PY=${INFLIGHT_GRPC_PY_DIR}")

# The same greedy text on every path: HTTP JSON and binary, gRPC, the BLS model, the OpenAI routes and
# the three models by hand (issue 26); the device round runs it on a GPU engine's repository too.
add_test(NAME e2e_test_every_path
  COMMAND ${_bls_python} -m unittest -v test_every_path
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(e2e_test_every_path PROPERTIES
  LABELS e2e TIMEOUT 600 FIXTURES_REQUIRED "${_bls_fixtures}"
  ENVIRONMENT "${_llm_env};INFLIGHT_GRPC_PY=${INFLIGHT_GRPC_PY_DIR}")

# Leader and orchestrator modes (docs/multi_gpu.md, "Process modes"): the demo model split over MPI
# ranks (tp 2, pp 2, tp 2 x pp 2), served under mpirun, through launch_server.py and with spawned
# workers (TRTLLM_ORCHESTRATOR=1), against the one-rank server; a random engine made at load by each
# rank answers as its rank files do; a killed rank ends the job; a world size that does not fit is
# refused. Label mpi; needs Open MPI's mpirun.
find_program(MPIRUN_EXECUTABLE mpirun)
if(MPIRUN_EXECUTABLE)
  foreach(_case TensorParallelTest PipelineParallelTest WeightsAtLoadTest FaultTest OrchestratorTest)
    add_test(NAME e2e_mpi_leader_${_case}
      COMMAND ${Python3_EXECUTABLE} -m unittest -v test_mpi_leader.${_case}
      WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
    set_tests_properties(e2e_mpi_leader_${_case} PROPERTIES
      LABELS "mpi;e2e" TIMEOUT 300 FIXTURES_REQUIRED llm_repos
      ENVIRONMENT "${_llm_env};INFLIGHT_LLM_CHECKPOINT=${_llm_work}/default/gpt2-random;INFLIGHT_BUILD_TOOL=$<TARGET_FILE:inflight-build>")
  endforeach()
else()
  message(STATUS "e2e: mpirun not found (apt-get install openmpi-bin); the leader-mode tests are not registered")
endif()

# The OpenAI-compatible routes (src/server/openai/) over the LLM repository: every endpoint, good and bad
# input, streaming (test_openai_api.py); and the official `openai` npm client against them
# (test_openai_js.py), installed into the build tree by e2e_openai_js_install (needs node, npm and the npm
# registry; a pinned version, in a folder named after it so that a new pin installs afresh).
if(TARGET inflight_server_openai)
  add_test(NAME e2e_test_openai_api
    COMMAND ${Python3_EXECUTABLE} -m unittest -v test_openai_api
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  set_tests_properties(e2e_test_openai_api PROPERTIES
    LABELS e2e TIMEOUT 600 ENVIRONMENT "${_llm_env}" FIXTURES_REQUIRED llm_repos)
  find_program(NODE_EXECUTABLE node)
  find_program(NPM_EXECUTABLE npm)
  if(NODE_EXECUTABLE AND NPM_EXECUTABLE)
    set(_openai_js_version 4.95.0)
    set(_openai_js ${PROJECT_BINARY_DIR}/openai_js_${_openai_js_version})
    add_test(NAME e2e_openai_js_install
      COMMAND sh -c "[ -f \"$0/node_modules/openai/package.json\" ] || \"$1\" install --prefix \"$0\" \
--no-save --no-audit --no-fund --loglevel=error openai@$2"
        ${_openai_js} ${NPM_EXECUTABLE} ${_openai_js_version})
    set_tests_properties(e2e_openai_js_install PROPERTIES FIXTURES_SETUP openai_js LABELS e2e TIMEOUT 300)
    add_test(NAME e2e_test_openai_js
      COMMAND ${Python3_EXECUTABLE} -m unittest -v test_openai_js
      WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
    set_tests_properties(e2e_test_openai_js PROPERTIES
      LABELS e2e TIMEOUT 600 FIXTURES_REQUIRED "llm_repos;openai_js"
      ENVIRONMENT "${_llm_env};INFLIGHT_OPENAI_JS=${_openai_js}/node_modules/openai;INFLIGHT_NODE=${NODE_EXECUTABLE}")
  else()
    message(STATUS "e2e: node/npm not found (apt-get install npm); the openai JS client test is not registered")
  endif()
endif()
