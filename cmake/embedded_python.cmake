# The CPython that inflight-server embeds to render chat templates with Jinja2 (src/server/openai/).
# It must be the system's Python with Debian's python3-jinja2, not whatever `python3` comes first on
# PATH (a pyenv or venv build has neither that jinja2 nor, often, a shared libpython). So the
# interpreter is named explicitly (INFLIGHT_EMBED_PYTHON, default the Debian path) and asked for its
# own headers and library; FindPython3 would share Python3_EXECUTABLE with the test scripts.
#
# Result: target inflight_embedded_python (headers, libpython, INFLIGHT_EMBED_PYTHON=<interpreter>)
# and INFLIGHT_EMBED_PYTHON_FOUND.
set(INFLIGHT_EMBED_PYTHON "/usr/bin/python3" CACHE FILEPATH
    "Python interpreter (with jinja2) whose libpython inflight-server embeds for chat templates")
set(INFLIGHT_EMBED_PYTHON_FOUND OFF)
if(NOT EXISTS "${INFLIGHT_EMBED_PYTHON}")
  message(WARNING "Inflight: ${INFLIGHT_EMBED_PYTHON} not found (apt-get install python3-dev "
                  "python3-jinja2); inflight-server is built without its OpenAI-compatible routes")
  return()
endif()
execute_process(
  COMMAND "${INFLIGHT_EMBED_PYTHON}" -c
    "import sysconfig, jinja2; v = sysconfig.get_config_var; print(sysconfig.get_paths()['include'] + ';' + v('LIBDIR') + ';' + v('MULTIARCH') + ';' + v('LDVERSION') + ';' + jinja2.__version__)"
  OUTPUT_VARIABLE _py_info OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_VARIABLE _py_error RESULT_VARIABLE _py_result)
if(NOT _py_result EQUAL 0)
  message(WARNING "Inflight: ${INFLIGHT_EMBED_PYTHON} cannot import jinja2 (apt-get install "
                  "python3-jinja2): ${_py_error}; inflight-server is built without its OpenAI routes")
  return()
endif()
list(GET _py_info 0 _py_include)
list(GET _py_info 1 _py_libdir)
list(GET _py_info 2 _py_multiarch)
list(GET _py_info 3 _py_ldversion)
list(GET _py_info 4 _jinja2_version)
find_library(INFLIGHT_LIBPYTHON NAMES python${_py_ldversion}
  HINTS "${_py_libdir}" "${_py_libdir}/${_py_multiarch}" NO_DEFAULT_PATH)
if(NOT INFLIGHT_LIBPYTHON OR NOT EXISTS "${_py_include}/Python.h")
  message(WARNING "Inflight: no libpython${_py_ldversion} or Python.h for ${INFLIGHT_EMBED_PYTHON} "
                  "(apt-get install python3-dev); inflight-server is built without its OpenAI routes")
  return()
endif()
add_library(inflight_embedded_python INTERFACE)
target_include_directories(inflight_embedded_python SYSTEM INTERFACE "${_py_include}")
target_link_libraries(inflight_embedded_python INTERFACE "${INFLIGHT_LIBPYTHON}" ${CMAKE_DL_LIBS})
target_compile_definitions(inflight_embedded_python INTERFACE
  INFLIGHT_EMBED_PYTHON="${INFLIGHT_EMBED_PYTHON}")
set(INFLIGHT_EMBED_PYTHON_FOUND ON)
message(STATUS "Inflight: chat templates with ${INFLIGHT_LIBPYTHON} and Jinja2 ${_jinja2_version}")
