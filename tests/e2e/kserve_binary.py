"""The bytes Python's tritonclient.http puts on the wire for an infer call, and the reading of its answer,
written with the standard library only (tritonclient and numpy are not installed here).

Facts from triton-inference-server/client, src/python/library/tritonclient/http/:
  _utils.py _get_inference_request: the JSON is rapidjson.dumps of {"id"?, "inputs", "outputs"?,
    "parameters"?} (compact, keys in that order); with no outputs listed, parameters.binary_data_output is
    true; the binary inputs' bytes follow the JSON in input order; json_size is None when no input is binary.
  _client.py infer: "Inference-Header-Content-Length: <json_size>" when json_size is not None; no
    Content-Type; POST v2/models/<quoted name>/infer.
  _infer_input.py set_data_from_numpy(binary_data=True): parameters {"binary_data_size": n}, no "data";
    BYTES serialized as a 4-byte little-endian length before each element (utils.serialize_byte_tensor).
  _requested_output.py InferRequestedOutput(name, binary_data=True): {"name", "parameters": {"binary_data"}}.
  _infer_result.py InferResult: a gzip or deflate Content-Encoding is undone first; then
    Inference-Header-Content-Length splits the answer; each output with parameters.binary_data_size
    takes that many bytes of the rest, in output order.
"""

import gzip
import http.client
import json
import struct
import zlib
from urllib.parse import quote

# struct codes of the fixed-size KServe datatypes (little-endian on the wire).
STRUCT_CODES = {"BOOL": "?", "UINT8": "B", "UINT16": "H", "UINT32": "I", "UINT64": "Q", "INT8": "b",
                "INT16": "h", "INT32": "i", "INT64": "q", "FP16": "e", "FP32": "f", "FP64": "d"}


def dumps(obj):
    """rapidjson.dumps's default output: compact, ASCII only."""
    return json.dumps(obj, separators=(",", ":"))


def serialize_bytes(values):
    out = b""
    for v in values:
        v = v if isinstance(v, bytes) else str(v).encode("utf-8")
        out += struct.pack("<I", len(v)) + v
    return out


def deserialize_bytes(data):
    values, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack_from("<I", data, offset)
        values.append(data[offset + 4:offset + 4 + length])
        offset += 4 + length
    return values


class InferInput:
    """An input as tritonclient.http.InferInput(name, shape, datatype).set_data_from_numpy(array, binary_data)
    makes it; `values` are the array's elements in row-major order."""

    def __init__(self, name, shape, datatype, values, binary_data=True):
        self.name, self.shape, self.datatype = name, list(shape), datatype
        self.parameters, self.data, self.raw = {}, None, None
        if binary_data:
            if datatype == "BYTES":
                self.raw = serialize_bytes(values)
            else:
                self.raw = struct.pack("<%d%s" % (len(values), STRUCT_CODES[datatype]), *values)
            self.parameters["binary_data_size"] = len(self.raw)
        elif datatype == "BYTES":
            self.data = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]
        else:
            self.data = list(values)

    def tensor(self):
        tensor = {"name": self.name, "shape": self.shape, "datatype": self.datatype}
        if self.parameters:
            tensor["parameters"] = self.parameters
        if self.raw is None and self.data is not None:
            tensor["data"] = self.data
        return tensor


def requested_output(name, binary_data=True):
    return {"name": name, "parameters": {"binary_data": binary_data}}


def infer_body(inputs, outputs=None, request_id="", parameters=None):
    """(body, json_size): json_size is None when no input is binary, as in _get_inference_request."""
    request, params = {}, {}
    if request_id != "":
        request["id"] = request_id
    request["inputs"] = [i.tensor() for i in inputs]
    if outputs:
        request["outputs"] = list(outputs)
    else:
        params["binary_data_output"] = True
    params.update(parameters or {})
    if params:
        request["parameters"] = params
    header = dumps(request).encode()
    raws = [i.raw for i in inputs if i.raw is not None]
    if not raws:
        return header, None
    return header + b"".join(raws), len(header)


def post_infer(port, model, body, json_size=None, headers=None, timeout=120.0):
    """POSTs as tritonclient.http's infer does: (status, headers with lower-case keys, body bytes)."""
    all_headers = {}
    if json_size is not None:
        all_headers["Inference-Header-Content-Length"] = str(json_size)
    all_headers.update(headers or {})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", f"/v2/models/{quote(model)}/infer", body=body, headers=all_headers)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def decode_response(headers, data):
    """{output name: (datatype, shape, flat list of values)}, reading binary outputs as InferResult does;
    BYTES values come back as bytes whether they were sent as JSON or binary."""
    encoding = headers.get("content-encoding")
    if encoding == "gzip":
        data = gzip.decompress(data)
    elif encoding == "deflate":
        data = zlib.decompress(data)
    header_length = headers.get("inference-header-content-length")
    header = json.loads(data if header_length is None else data[:int(header_length)])
    binary = b"" if header_length is None else data[int(header_length):]
    out, offset = {}, 0
    for output in header["outputs"]:
        datatype, shape = output["datatype"], output["shape"]
        size = output.get("parameters", {}).get("binary_data_size")
        if size is None:
            values = output["data"]
            if datatype == "BYTES":
                values = [v.encode("utf-8") for v in values]
        else:
            raw = binary[offset:offset + size]
            offset += size
            if datatype == "BYTES":
                values = deserialize_bytes(raw)
            else:
                code = STRUCT_CODES[datatype]
                values = list(struct.unpack("<%d%s" % (size // struct.calcsize(code), code), raw))
        out[output["name"]] = (datatype, shape, values)
    if offset != len(binary):
        raise AssertionError(f"{len(binary) - offset} bytes after the last binary output")
    return out


def infer(port, model, inputs, outputs=None, request_id="", parameters=None):
    """tritonclient.http's infer(): (status, headers, decoded outputs or the error body's JSON)."""
    body, json_size = infer_body(inputs, outputs, request_id, parameters)
    status, headers, data = post_infer(port, model, body, json_size)
    if status != 200:
        return status, headers, json.loads(data)
    return status, headers, decode_response(headers, data)
