"""gRPC helpers for end-to-end tests: Triton's GRPCInferenceService through the Python stubs that
protoc generates from proto/grpc_service.proto at test time (directory INFLIGHT_GRPC_PY, made by the
e2e_grpc_python_stubs fixture), with Debian's python3-grpcio.

Requests are built as tritonclient.grpc builds them (tritonclient/grpc/_utils.py and _infer_input.py,
facts): every input's data in raw_input_contents in input order, little-endian, BOOL one byte per
element, BYTES elements each prefixed by a 4-byte little-endian length; request_id in `id`; the
`parameters` dict as bool_param / int64_param / string_param / double_param; requested outputs by name
only; async_stream_infer(enable_empty_final_response=True) as the triton_enable_empty_final_response
parameter.
"""

import os
import struct
import sys
import unittest

_STUBS = None

# KServe datatype -> struct format of one element (BYTES handled apart).
_FORMATS = {"BOOL": "?", "UINT8": "B", "UINT16": "H", "UINT32": "I", "UINT64": "Q", "INT8": "b",
            "INT16": "h", "INT32": "i", "INT64": "q", "FP16": "e", "FP32": "f", "FP64": "d"}


def stubs():
    """(grpc module, grpc_service_pb2, grpc_service_pb2_grpc), or SkipTest when unavailable."""
    global _STUBS
    if _STUBS is None:
        folder = os.environ.get("INFLIGHT_GRPC_PY")
        if not folder:
            raise unittest.SkipTest("INFLIGHT_GRPC_PY is not set (run through ctest)")
        try:
            import grpc  # noqa: F401  (Debian: python3-grpcio)
        except ImportError as e:
            raise unittest.SkipTest(f"python3-grpcio is not installed: {e}")
        sys.path.insert(0, folder)
        import grpc_service_pb2
        import grpc_service_pb2_grpc
        _STUBS = (grpc, grpc_service_pb2, grpc_service_pb2_grpc)
    return _STUBS


def flatten(values):
    if isinstance(values, (list, tuple)):
        out = []
        for v in values:
            out.extend(flatten(v))
        return out
    return [values]


def shape_of(values):
    shape = []
    while isinstance(values, (list, tuple)):
        shape.append(len(values))
        values = values[0] if values else None
    return shape


def serialize(datatype, values):
    """The raw bytes tritonclient puts in raw_input_contents for a nested list of `values`."""
    flat = flatten(values)
    if datatype == "BYTES":
        out = b""
        for v in flat:
            data = v.encode("utf-8") if isinstance(v, str) else bytes(v)
            out += struct.pack("<I", len(data)) + data
        return out
    return struct.pack("<" + _FORMATS[datatype] * len(flat), *flat)


def deserialize(datatype, raw):
    """A flat list of the elements of a raw_output_contents entry."""
    if datatype == "BYTES":
        out, offset = [], 0
        while offset < len(raw):
            (n,) = struct.unpack_from("<I", raw, offset)
            out.append(raw[offset + 4:offset + 4 + n])
            offset += 4 + n
        return out
    size = struct.calcsize(_FORMATS[datatype])
    return list(struct.unpack("<" + _FORMATS[datatype] * (len(raw) // size), raw))


def infer_request(model_name, inputs, outputs=None, request_id="", parameters=None,
                  enable_empty_final_response=False, model_version=""):
    """A ModelInferRequest as tritonclient.grpc builds it. `inputs`: [(name, datatype, nested values)]
    or (name, datatype, shape, raw bytes)."""
    _, pb, _ = stubs()
    request = pb.ModelInferRequest(model_name=model_name, model_version=model_version)
    if request_id:
        request.id = request_id
    for spec in inputs:
        tensor = request.inputs.add()
        if len(spec) == 4:
            tensor.name, tensor.datatype, shape, raw = spec
        else:
            tensor.name, tensor.datatype, values = spec
            shape, raw = shape_of(values), serialize(tensor.datatype, values)
        tensor.shape.extend(shape)
        request.raw_input_contents.append(raw)
    for name in outputs or []:
        request.outputs.add().name = name
    for key, value in (parameters or {}).items():
        if isinstance(value, bool):
            request.parameters[key].bool_param = value
        elif isinstance(value, int):
            request.parameters[key].int64_param = value
        elif isinstance(value, str):
            request.parameters[key].string_param = value
        else:
            request.parameters[key].double_param = value
    if enable_empty_final_response:
        request.parameters["triton_enable_empty_final_response"].bool_param = True
    return request


def outputs_of(response):
    """{output name: (datatype, shape, flat elements)} of a ModelInferResponse."""
    out = {}
    for tensor, raw in zip(response.outputs, response.raw_output_contents):
        out[tensor.name] = (tensor.datatype, list(tensor.shape), deserialize(tensor.datatype, raw))
    return out


def is_final(response):
    p = response.parameters.get("triton_final_response")
    return p is not None and p.bool_param


class Client:
    """One channel to a server's gRPC port, with tritonclient's message-size options."""

    def __init__(self, port):
        grpc, _, svc = stubs()
        options = [("grpc.max_send_message_length", 2**31 - 1),
                   ("grpc.max_receive_message_length", 2**31 - 1)]
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
        self.stub = svc.GRPCInferenceServiceStub(self.channel)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def stream(self, requests, timeout=120):
        """Sends `requests` on one ModelStreamInfer call and returns every message until it ends."""
        return list(self.stub.ModelStreamInfer(iter(requests), timeout=timeout))
