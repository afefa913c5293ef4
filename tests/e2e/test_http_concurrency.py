"""64 clients at once, streaming and not, each must get exactly its own answer."""

import threading
import unittest

from inflight_client import InflightServer, post_json, stream_sse

CLIENTS = 64


class HttpConcurrencyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        args = ["--model-control-mode=explicit", "--load-model=echo", "--load-model=stream"]
        cls.server = InflightServer(args).start()
        cls.port = cls.server.http_port

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        assert code == 0, f"inflight-server exited with {code}:\n{cls.server.log()}"

    def run_clients(self, work):
        failures = []
        lock = threading.Lock()
        start = threading.Barrier(CLIENTS)

        def client(i):
            start.wait()
            try:
                problem = work(i)
            except Exception as e:  # noqa: BLE001 - any failure of one client is reported with its index
                problem = repr(e)
            if problem:
                with lock:
                    failures.append((i, problem))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(failures), [])

    def test_concurrent_streams(self):
        def work(i):
            count = 1 + i % 3
            result = stream_sse(self.port, "/v2/models/stream/generate_stream", {"IN0": [i, -i], "count": count})
            if result.status != 200:
                return f"status {result.status}: {result.body}"
            if [e.get("INDEX") for e in result.events] != list(range(count)):
                return f"events {result.events}"
            if any(e.get("OUT_IN0") != [i, -i] for e in result.events):
                return f"someone else's data: {result.events}"
            return None

        self.run_clients(work)

    def test_concurrent_infer(self):
        def work(i):
            body = {"id": str(i), "inputs": [
                {"name": "IN0", "shape": [2], "datatype": "INT32", "data": [i, i * 7]},
                {"name": "IN1", "shape": [1], "datatype": "BYTES", "data": [f"client {i}"]}]}
            status, out = post_json(self.port, "/v2/models/echo/infer", body)
            if status != 200:
                return f"status {status}: {out}"
            outputs = {t["name"]: t["data"] for t in out["outputs"]}
            if out["id"] != str(i) or outputs != {"OUT_IN0": [i, i * 7], "OUT_IN1": [f"client {i}"]}:
                return f"wrong answer {out}"
            return None

        self.run_clients(work)


if __name__ == "__main__":
    unittest.main()
