"""End to end: inflight-server's OpenAI-compatible routes (/v1/models, /v1/completions, /v1/chat/completions)
over real HTTP, serving the LLM demo repository (random-weight GPT-2 engine, GPT-2's tokenizer with a chat
template added; see openai_fixture.py). Greedy results are checked against the same request made through
/v2/models/ensemble/generate, token counts against the preprocessing model, errors field by field.
"""
import http.client
import json
import socket
import unittest

import inflight_client as ic
import openai_fixture as fx

PROMPT = "What is machine learning?"
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": PROMPT}]


def read_sse(port, path, body, max_events=None, timeout=120):
    """(status, content type, list of data payloads as text) of a streamed POST; hangs up after
    max_events."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        content_type = resp.getheader("Content-Type", "")
        if not content_type.startswith("text/event-stream"):
            return resp.status, content_type, [resp.read().decode()]
        events = []
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.decode("utf-8").rstrip("\r\n")
            if line.startswith("data: "):
                events.append(line[6:])
                if max_events and len(events) >= max_events:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                    break
        return resp.status, content_type, events
    finally:
        conn.close()


class OpenAiApiTest(unittest.TestCase):
    tmp = server = None

    @classmethod
    def setUpClass(cls):
        cls.tmp, repo = fx.make_repository()
        cls.server = fx.start_server(repo)
        cls.port = cls.server.http_port

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.server and cls.server.stop() != 0:
                raise AssertionError("inflight-server did not exit cleanly:\n" + cls.server.log())
        finally:
            if cls.tmp:
                cls.tmp.cleanup()

    def post(self, path, body):
        return ic.post_json(self.port, path, body, timeout=120)

    def ok(self, path, body):
        status, out = self.post(path, body)
        self.assertEqual(status, 200, out)
        return out

    def stream(self, path, body, **kw):
        status, content_type, events = read_sse(self.port, path, dict(body, stream=True), **kw)
        self.assertEqual(status, 200, events)
        self.assertTrue(content_type.startswith("text/event-stream"), content_type)
        return events

    def assert_error(self, path, body, status, param, message_part=None):
        got_status, out = self.post(path, body)
        self.assertEqual(got_status, status, out)
        self.assertEqual(set(out), {"error"}, out)
        error = out["error"]
        self.assertEqual(set(error), {"message", "type", "param", "code"}, error)
        self.assertEqual(error["param"], param, error)
        self.assertIsNone(error["code"])
        self.assertEqual(error["type"], "invalid_request_error")
        if message_part:
            self.assertIn(message_part, error["message"])
        return error["message"]

    def num_tokens(self, text):
        out = self.ok("/v2/models/preprocessing/generate", {"QUERY": text, "REQUEST_OUTPUT_LEN": 1})
        return len(out["INPUT_ID"])

    def ensemble(self, text, max_tokens, **extra):
        body = {"text_input": text, "max_tokens": max_tokens, "bad_words": "", "stop_words": ""}
        body.update(extra)
        return self.ok("/v2/models/ensemble/generate", body)

    # --- /v1/models

    def test_models_lists_the_ensembles(self):
        out = self.ok_get("/v1/models")
        self.assertEqual(out["object"], "list")
        ids = sorted(m["id"] for m in out["data"])
        # tensorrt_llm, preprocessing and postprocessing lack the text interface; the BLS has no tokenizer.
        self.assertEqual(ids, ["ensemble", "ensemble_plain"])
        for m in out["data"]:
            self.assertEqual(m["object"], "model")
            self.assertIsInstance(m["created"], int)
        self.assertEqual(self.ok_get("/v1/models/ensemble")["id"], "ensemble")
        status, out = ic.get_json(self.port, "/v1/models/tensorrt_llm")
        self.assertEqual(status, 404)
        self.assertEqual(out["error"]["param"], "model")
        status, out = ic.get_json(self.port, "/v1/models/nonexistent")
        self.assertEqual(status, 404)

    def ok_get(self, path):
        status, out = ic.get_json(self.port, path)
        self.assertEqual(status, 200, out)
        return out

    # --- /v1/completions

    def test_completion_is_the_ensembles_greedy_text(self):
        out = self.ok("/v1/completions", {"model": "ensemble", "prompt": PROMPT, "max_tokens": 12,
                                          "temperature": 0})
        self.assertEqual(out["object"], "text_completion")
        self.assertTrue(out["id"].startswith("cmpl-"))
        self.assertEqual(out["model"], "ensemble")
        [choice] = out["choices"]
        self.assertEqual(choice["index"], 0)
        self.assertEqual(choice["text"], self.ensemble(PROMPT, 12)["text_output"])
        self.assertEqual(choice["finish_reason"], "length")
        self.assertIsNone(choice["logprobs"])
        prompt_tokens = self.num_tokens(PROMPT)
        self.assertEqual(out["usage"], {"prompt_tokens": prompt_tokens, "completion_tokens": 12,
                                        "total_tokens": prompt_tokens + 12})
        # A list of one prompt is the same request; max_tokens defaults to OpenAI's 16.
        one = self.ok("/v1/completions", {"model": "ensemble", "prompt": [PROMPT], "max_tokens": 12,
                                          "temperature": 0})
        self.assertEqual(one["choices"][0]["text"], choice["text"])
        default = self.ok("/v1/completions", {"model": "ensemble", "prompt": PROMPT, "temperature": 0})
        self.assertEqual(default["usage"]["completion_tokens"], 16)

    def test_completion_stream_matches_and_ends_with_done(self):
        body = {"model": "ensemble", "prompt": PROMPT, "max_tokens": 10, "temperature": 0}
        whole = self.ok("/v1/completions", body)["choices"][0]["text"]
        events = self.stream("/v1/completions", body)
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        self.assertGreaterEqual(len(chunks), 3)  # streamed, not one piece
        self.assertEqual("".join(c["choices"][0]["text"] for c in chunks), whole)
        for c in chunks:
            self.assertEqual(c["object"], "text_completion")
            self.assertNotIn("usage", c)
        self.assertEqual([c["choices"][0]["finish_reason"] for c in chunks][-1], "length")
        self.assertTrue(all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]))
        self.assertEqual(len({c["id"] for c in chunks}), 1)

        events = self.stream("/v1/completions", dict(body, stream_options={"include_usage": True}))
        chunks = [json.loads(e) for e in events[:-1]]
        usage_chunk = chunks[-1]
        self.assertEqual(usage_chunk["choices"], [])
        prompt_tokens = self.num_tokens(PROMPT)
        self.assertEqual(usage_chunk["usage"], {"prompt_tokens": prompt_tokens, "completion_tokens": 10,
                                                "total_tokens": prompt_tokens + 10})
        self.assertTrue(all(c["usage"] is None for c in chunks[:-1]))

    def test_stop_strings_cut_the_text(self):
        body = {"model": "ensemble", "prompt": PROMPT, "max_tokens": 16, "temperature": 0}
        whole = self.ok("/v1/completions", body)["choices"][0]["text"]
        self.assertGreater(len(whole), 12, whole)
        stop = whole[6:9]
        expected = whole[:whole.index(stop)]
        out = self.ok("/v1/completions", dict(body, stop=[stop, "never-in-the-text"]))
        self.assertEqual(out["choices"][0]["text"], expected)
        self.assertEqual(out["choices"][0]["finish_reason"], "stop")
        self.assertLess(out["usage"]["completion_tokens"], 16)
        events = self.stream("/v1/completions", dict(body, stop=stop))
        chunks = [json.loads(e) for e in events[:-1]]
        self.assertEqual("".join(c["choices"][0]["text"] for c in chunks), expected)
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "stop")

    def test_logprobs_are_the_engines(self):
        body = {"model": "ensemble", "prompt": PROMPT, "max_tokens": 8, "temperature": 0, "logprobs": 0}
        out = self.ok("/v1/completions", body)
        lp = out["choices"][0]["logprobs"]
        reference = self.ensemble(PROMPT, 8, return_log_probs=True)["output_log_probs"]
        self.assertEqual(len(lp["token_logprobs"]), 8)
        for got, want in zip(lp["token_logprobs"], reference):
            self.assertAlmostEqual(got, want, places=5)
        self.assertEqual("".join(lp["tokens"]), out["choices"][0]["text"])
        self.assertEqual(len(lp["text_offset"]), 8)
        self.assertEqual(lp["text_offset"][0], 0)

        chat = self.ok("/v1/chat/completions", {"model": "ensemble", "messages": MESSAGES, "max_tokens": 5,
                                                "temperature": 0, "logprobs": True, "top_logprobs": 0})
        content = chat["choices"][0]["logprobs"]["content"]
        self.assertEqual(len(content), 5)
        self.assertEqual("".join(t["token"] for t in content), chat["choices"][0]["message"]["content"])
        self.assertTrue(all(t["logprob"] <= 0 and t["top_logprobs"] == [] for t in content))

    def test_seeded_sampling_repeats(self):
        body = {"model": "ensemble", "prompt": PROMPT, "max_tokens": 12, "temperature": 1.0, "top_p": 0.9,
                "seed": 1234}
        first = self.ok("/v1/completions", body)["choices"][0]["text"]
        self.assertEqual(self.ok("/v1/completions", body)["choices"][0]["text"], first)
        # Temperature > 0 samples (the server sends top_p with it): seeds give different texts, and not
        # the greedy one. The random-weight model's distributions are flat, so 4 seeds agreeing would
        # mean sampling is off.
        greedy = self.ok("/v1/completions", dict(body, temperature=0))["choices"][0]["text"]
        others = {self.ok("/v1/completions", dict(body, seed=s))["choices"][0]["text"] for s in range(4)}
        self.assertGreater(len(others), 1, others)
        self.assertNotIn(greedy, others | {first})

    # --- /v1/chat/completions

    def test_chat_renders_the_template(self):
        out = self.ok("/v1/chat/completions", {"model": "ensemble", "messages": MESSAGES, "max_tokens": 9,
                                               "temperature": 0})
        self.assertEqual(out["object"], "chat.completion")
        self.assertTrue(out["id"].startswith("chatcmpl-"))
        [choice] = out["choices"]
        self.assertEqual(choice["message"]["role"], "assistant")
        prompt = fx.render_chat(MESSAGES)
        self.assertEqual(choice["message"]["content"], self.ensemble(prompt, 9)["text_output"])
        self.assertEqual(choice["finish_reason"], "length")
        self.assertEqual(out["usage"]["prompt_tokens"], self.num_tokens(prompt))
        self.assertEqual(out["usage"]["completion_tokens"], 9)
        # max_completion_tokens is max_tokens' newer name; text content parts are joined.
        parts = [{"role": "user", "content": [{"type": "text", "text": "What is"},
                                              {"type": "text", "text": "machine learning?"}]}]
        joined = self.ok("/v1/chat/completions", {"model": "ensemble", "messages": parts,
                                                  "max_completion_tokens": 4, "temperature": 0})
        self.assertEqual(joined["usage"]["completion_tokens"], 4)
        self.assertEqual(joined["usage"]["prompt_tokens"],
                         self.num_tokens(fx.render_chat([{"role": "user",
                                                          "content": "What is\nmachine learning?"}])))

    def test_chat_stream(self):
        body = {"model": "ensemble", "messages": MESSAGES, "max_tokens": 7, "temperature": 0}
        whole = self.ok("/v1/chat/completions", body)["choices"][0]["message"]["content"]
        events = self.stream("/v1/chat/completions", dict(body, stream_options={"include_usage": True}))
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        self.assertEqual(chunks[0]["choices"][0]["delta"], {"role": "assistant", "content": ""})
        self.assertTrue(all(c["object"] == "chat.completion.chunk" for c in chunks))
        content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        self.assertEqual(content, whole)
        self.assertEqual(chunks[-2]["choices"][0]["finish_reason"], "length")
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 7)

    def test_client_that_leaves_cancels(self):
        status, _, events = read_sse(self.port, "/v1/completions",
                                     {"model": "ensemble", "prompt": PROMPT, "max_tokens": 900,
                                      "temperature": 0, "stream": True}, max_events=3)
        self.assertEqual(status, 200)
        self.assertEqual(len(events), 3)
        # The request is cancelled: the model goes idle and every KV block comes back long before
        # 900 tokens could have been generated.
        ic.wait_llm_idle(self.server.metrics_port, timeout=30)

    # --- errors

    def test_errors_name_the_field(self):
        c, ch = "/v1/completions", "/v1/chat/completions"
        base = {"model": "ensemble", "prompt": PROMPT}
        chat = {"model": "ensemble", "messages": MESSAGES}
        self.assert_error(c, dict(base, n=2), 400, "n", "n = 1")
        self.assert_error(c, dict(base, prompt=["a", "b"]), 400, "prompt", "one prompt")
        self.assert_error(c, dict(base, prompt=[1, 2, 3]), 400, "prompt")
        self.assert_error(c, dict(base, logprobs=2), 400, "logprobs", "logprobs 0")
        self.assert_error(c, dict(base, echo=True), 400, "echo")
        self.assert_error(c, dict(base, best_of=3), 400, "best_of")
        self.assert_error(c, dict(base, logit_bias={"50256": -100}), 400, "logit_bias")
        self.assert_error(c, dict(base, temperature=3), 400, "temperature", "[0, 2]")
        self.assert_error(c, dict(base, max_tokens=0), 400, "max_tokens")
        self.assert_error(c, dict(base, stop=["a", "b", "c", "d", "e"]), 400, "stop")
        self.assert_error(c, dict(base, seed=-1), 400, "seed")
        self.assert_error(c, dict(base, top_k=5), 400, "top_k", "unknown field")
        self.assert_error(c, {"prompt": PROMPT}, 400, "model")
        self.assert_error(c, dict(base, model="nonexistent"), 404, "model", "nonexistent")
        self.assert_error(c, dict(base, model="tensorrt_llm"), 404, "model")
        self.assert_error(ch, dict(chat, n=3), 400, "n")
        self.assert_error(ch, dict(chat, top_logprobs=3, logprobs=True), 400, "top_logprobs")
        self.assert_error(ch, dict(chat, top_logprobs=0), 400, "top_logprobs", "logprobs: true")
        self.assert_error(ch, dict(chat, tools=[{"type": "function", "function": {"name": "f"}}]), 400, "tools")
        self.assert_error(ch, dict(chat, tool_choice="required"), 400, "tool_choice")
        self.assert_error(ch, dict(chat, response_format={"type": "json_object"}), 400, "response_format")
        self.assert_error(ch, dict(chat, max_tokens=5, max_completion_tokens=6), 400, "max_completion_tokens")
        self.assert_error(ch, {"model": "ensemble", "messages": []}, 400, "messages")
        self.assert_error(ch, {"model": "ensemble", "messages": [{"role": "robot", "content": "x"}]}, 400,
                          "messages[0].role")
        self.assert_error(ch, {"model": "ensemble",
                               "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
                          400, "messages[0].content[0].type")
        # The template's own raise_exception, word for word.
        message = self.assert_error(ch, {"model": "ensemble", "messages": [{"role": "tool", "content": "x"}]},
                                    400, "messages")
        self.assertEqual(message, fx.TEMPLATE_ERROR)
        # A tokenizer folder without a chat template: completions work, chat says why it cannot.
        self.assert_error(ch, dict(chat, model="ensemble_plain"), 400, "messages", "no chat template")
        self.ok(c, dict(base, model="ensemble_plain", max_tokens=2))
        # Not JSON; a streamed request refused before it starts is a plain JSON error.
        status, _, data = ic.request("POST", self.port, c, body="{not json")
        self.assertEqual(status, 400)
        self.assertIn("not valid JSON", json.loads(data)["error"]["message"])
        status, content_type, body = read_sse(self.port, c, dict(base, n=2, stream=True))
        self.assertEqual(status, 400)
        self.assertTrue(content_type.startswith("application/json"))
        # Unharmful fields clients send are accepted.
        self.ok(c, dict(base, max_tokens=2, user="someone", n=1, stream=False, suffix=None))
        # The engine's own refusal (a prompt longer than the engine takes) is a 400 with its words.
        status, out = self.post(c, dict(base, prompt="hello " * 600, max_tokens=4))
        self.assertEqual(status, 400, out)
        self.assertEqual(out["error"]["type"], "invalid_request_error")


if __name__ == "__main__":
    unittest.main()
