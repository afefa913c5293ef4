"""End to end: the official `openai` JavaScript client (npm, installed by the e2e_openai_js_install test into
the build tree) talks to inflight-server's OpenAI routes: models, completions and chat, streaming and not,
and an error. openai_js_client.cjs makes the calls; this checks them against the server's own answers.

Environment: INFLIGHT_OPENAI_JS (the installed package folder), INFLIGHT_NODE (node), and the LLM ones.
"""
import json
import os
import subprocess
import unittest

import inflight_client as ic
import openai_fixture as fx

PROMPT = "What is machine learning?"


class OpenAiJsClientTest(unittest.TestCase):
    def test_official_client(self):
        package = ic.env_or_skip("INFLIGHT_OPENAI_JS")
        node = ic.env_or_skip("INFLIGHT_NODE")
        tmp, repo = fx.make_repository()
        server = fx.start_server(repo)
        try:
            base = f"http://127.0.0.1:{server.http_port}/v1"
            run = subprocess.run([node, os.path.join(os.path.dirname(__file__), "openai_js_client.cjs"),
                                  package, base, "ensemble"], capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr + run.stdout)
            out = json.loads(run.stdout)
            # What the server says over plain HTTP, for comparison.
            status, plain = ic.post_json(server.http_port, "/v2/models/ensemble/generate",
                                         {"text_input": PROMPT, "max_tokens": 8}, timeout=120)
            self.assertEqual(status, 200, plain)
            chat_prompt = fx.render_chat([{"role": "user", "content": PROMPT}])
            status, plain_chat = ic.post_json(server.http_port, "/v2/models/ensemble/generate",
                                              {"text_input": chat_prompt, "max_tokens": 6}, timeout=120)
            self.assertEqual(status, 200, plain_chat)
        finally:
            code = server.stop()
            tmp.cleanup()
        self.assertEqual(code, 0, server.log())

        self.assertEqual(sorted(out["models"]), ["ensemble", "ensemble_plain"])
        self.assertEqual(out["completion"]["text"], plain["text_output"])
        self.assertEqual(out["completion"]["finish"], "length")
        self.assertEqual(out["completion"]["usage"]["completion_tokens"], 8)
        self.assertEqual(out["completion_stream"]["text"], plain["text_output"])
        self.assertGreaterEqual(out["completion_stream"]["chunks"], 3)
        self.assertEqual(out["chat"]["content"], plain_chat["text_output"])
        self.assertEqual(out["chat"]["role"], "assistant")
        self.assertEqual(out["chat"]["usage"]["completion_tokens"], 6)
        self.assertEqual(out["chat_stream"]["content"], plain_chat["text_output"])
        self.assertEqual(out["chat_stream"]["finish"], "length")
        self.assertEqual(out["chat_stream"]["usage"], out["chat"]["usage"])
        self.assertEqual(out["error"]["status"], 400)
        self.assertEqual(out["error"]["param"], "n")
        self.assertEqual(out["error"]["type"], "invalid_request_error")


if __name__ == "__main__":
    unittest.main()
