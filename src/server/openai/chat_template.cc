// RenderChatTemplate: one embedded CPython interpreter running Jinja2.
//
// NOTE: Python.h must come first (it sets feature macros that the C library headers read).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <utility>

#include "common/logging.h"
#include "server/openai/chat_template.h"

namespace inflight::server::openai {
namespace {

// The Jinja2 environment of transformers' _compile_jinja_template (chat_template_utils.py, read at
// huggingface/transformers 5e43e2e): the same options, extensions, filter and globals, written here
// for rendering only (the {% generation %} tag renders its body; transformers also records where it
// was, which a server does not need). Templates are compiled once and kept.
constexpr const char* kRendererSource = R"PY(
import datetime
import json

import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox


class _GenerationTag(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_body", [], [])
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(format):
    return datetime.datetime.now().strftime(format)


_env = jinja2.sandbox.ImmutableSandboxedEnvironment(
    trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols])
_env.filters["tojson"] = _tojson
_env.globals["raise_exception"] = _raise_exception
_env.globals["strftime_now"] = _strftime_now
_compiled = {}


def render(source, context_json):
    template = _compiled.get(source)
    if template is None:
        template = _env.from_string(source)
        if len(_compiled) < 64:
            _compiled[source] = template
    return template.render(**json.loads(context_json))


def is_template_error(error):
    return isinstance(error, jinja2.exceptions.TemplateError)
)PY";

// Holds a reference; Python objects are only touched with the GIL held.
struct PyRef {
  PyObject* p = nullptr;
  explicit PyRef(PyObject* o) : p(o) {}
  ~PyRef() { Py_XDECREF(p); }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
};

std::string PyText(PyObject* object) {
  if (object == nullptr) return "";
  PyRef text(PyObject_Str(object));
  if (text.p == nullptr) {
    PyErr_Clear();
    return "<unprintable>";
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text.p, &size);
  if (data == nullptr) {
    PyErr_Clear();
    return "<unprintable>";
  }
  return std::string(data, static_cast<std::size_t>(size));
}

class Interpreter {
 public:
  static Interpreter& Get() {
    static Interpreter* interpreter = new Interpreter();  // never destroyed: see ~Interpreter
    return *interpreter;
  }

  Result<std::string> Render(const std::string& source, const std::string& context_json) {
    if (!start_status_.ok()) return start_status_;
    PyGILState_STATE gil = PyGILState_Ensure();
    Result<std::string> out = RenderLocked(source, context_json);
    PyGILState_Release(gil);
    return out;
  }

 private:
  // NOTE: the interpreter is never finalized: Py_FinalizeEx at process exit can run while an io
  // thread renders, and the OS reclaims it anyway.
  Interpreter() { start_status_ = Start(); }

  Status Start() {
    if (Py_IsInitialized()) {
      // A host that already runs Python (none of ours does): use its interpreter.
      PyGILState_STATE gil = PyGILState_Ensure();
      Status st = LoadRenderer();
      PyGILState_Release(gil);
      return st;
    }
    // CPython finds its standard library from the program name: <prefix>/lib/pythonX.Y beside
    // <prefix>/bin/python3. A server built against one libpython and started on a host whose
    // python3 is another version (a binary carried from the build machine, a distribution upgrade)
    // would otherwise fail with CPython's "failed to get the Python codec of the filesystem
    // encoding", which names neither.
    const std::string major = std::to_string(PY_MAJOR_VERSION);
    const std::string minor = std::to_string(PY_MINOR_VERSION);
    const std::string version = major + "." + minor;
    const std::filesystem::path lib =
        std::filesystem::path(INFLIGHT_EMBED_PYTHON).parent_path().parent_path() / "lib";
    const std::filesystem::path stdlib = lib / ("python" + version);
    std::error_code ec;
    if (!std::filesystem::is_directory(stdlib, ec) &&
        !std::filesystem::exists(lib / ("python" + major + minor + ".zip"), ec)) {
      return Unavailable(
          "cannot start the embedded Python for chat templates: the server was built "
          "against Python " +
          version + " and its standard library " + stdlib.string() +
          " is not on this host (install python" + version +
          " here, or build the server on this host)");
    }
    PyConfig config;
    // Isolated: PYTHONPATH, PYTHONHOME and the user's site-packages of whoever starts the server do
    // not change which jinja2 renders. The program name is the build's system interpreter, from
    // which CPython finds its standard library, and its site module adds Debian's dist-packages.
    PyConfig_InitIsolatedConfig(&config);
    PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, INFLIGHT_EMBED_PYTHON);
    if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
      return Unavailable(
          std::string("cannot start the embedded Python (") + INFLIGHT_EMBED_PYTHON +
          ") for chat templates: " + (status.err_msg ? status.err_msg : "unknown error"));
    }
    Status st = LoadRenderer();
    // The thread that started the interpreter holds the GIL; let every thread take it in turn.
    PyEval_SaveThread();
    return st;
  }

  // With the GIL held.
  Status LoadRenderer() {
    PyObject* module = PyImport_AddModule("inflight_chat_template");  // borrowed
    if (module == nullptr) return Unavailable("cannot create the chat template module");
    PyObject* globals = PyModule_GetDict(module);  // borrowed
    PyRef result(PyRun_String(kRendererSource, Py_file_input, globals, globals));
    if (result.p == nullptr) {
      PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
      PyErr_Fetch(&type, &value, &trace);
      std::string message = PyText(value);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(trace);
      return Unavailable(std::string("chat templates need Jinja2 in ") + INFLIGHT_EMBED_PYTHON +
                         " (apt-get install python3-jinja2): " + message);
    }
    render_ = PyDict_GetItemString(globals, "render");
    is_template_error_ = PyDict_GetItemString(globals, "is_template_error");
    Py_XINCREF(render_);
    Py_XINCREF(is_template_error_);
    if (render_ == nullptr || is_template_error_ == nullptr) {
      return Internal("chat template module has no render function");
    }
    LOG_INFO("chat templates: embedded Python {} with Jinja2", Py_GetVersion());
    return Status();
  }

  Result<std::string> RenderLocked(const std::string& source, const std::string& context_json) {
    PyRef args(Py_BuildValue("(s#s#)", source.data(), static_cast<Py_ssize_t>(source.size()),
                             context_json.data(), static_cast<Py_ssize_t>(context_json.size())));
    if (args.p == nullptr) return TakeError();
    PyRef rendered(PyObject_CallObject(render_, args.p));
    if (rendered.p == nullptr) return TakeError();
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(rendered.p, &size);
    if (data == nullptr) return TakeError();
    return std::string(data, static_cast<std::size_t>(size));
  }

  // The pending Python exception as a Status: a Jinja2 error (raise_exception, a syntax error, an
  // undefined name) is the request's or the template's fault, so kInvalidArgument with the
  // template's own message; so is any other error the template raised on this conversation (a
  // TypeError from adding None to a string).
  Status TakeError() {
    PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
    PyErr_Fetch(&type, &value, &trace);
    PyErr_NormalizeException(&type, &value, &trace);
    std::string message = PyText(value);
    bool jinja_error = false;
    if (value != nullptr) {
      PyRef verdict(PyObject_CallFunctionObjArgs(is_template_error_, value, nullptr));
      jinja_error = verdict.p != nullptr && PyObject_IsTrue(verdict.p) == 1;
      PyErr_Clear();
    }
    std::string type_name = "Error";
    if (type != nullptr) {
      PyRef name(PyObject_GetAttrString(type, "__name__"));
      type_name = PyText(name.p);
    }
    PyErr_Clear();
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(trace);
    if (jinja_error) return InvalidArgument(message);
    return InvalidArgument("chat template failed: " + type_name + ": " + message);
  }

  Status start_status_;
  PyObject* render_ = nullptr;
  PyObject* is_template_error_ = nullptr;
};

}  // namespace

Result<std::string> RenderChatTemplate(const std::string& chat_template,
                                       const nlohmann::ordered_json& messages,
                                       bool add_generation_prompt,
                                       const nlohmann::ordered_json& special_tokens) {
  nlohmann::ordered_json context =
      special_tokens.is_object() ? special_tokens : nlohmann::ordered_json::object();
  context["messages"] = messages;
  context["add_generation_prompt"] = add_generation_prompt;
  context["tools"] = nullptr;
  context["documents"] = nullptr;
  return Interpreter::Get().Render(chat_template, context.dump());
}

}  // namespace inflight::server::openai
