// Drives inflight-server with the official `openai` npm client (test_openai_js.py runs this with node).
// argv: <path of the installed openai package> <base URL, e.g. http://127.0.0.1:8000/v1> <model>
// Prints one JSON object with what each call returned; the Python side checks it.
const assert = require("node:assert/strict");
const OpenAI = require(process.argv[2]);

async function main() {
  const client = new OpenAI({ apiKey: "unused", baseURL: process.argv[3], maxRetries: 0 });
  const model = process.argv[4];
  const prompt = "What is machine learning?";
  const messages = [{ role: "user", content: prompt }];
  const out = {};

  const models = await client.models.list();
  out.models = models.data.map((m) => m.id);

  const completion = await client.completions.create({
    model, prompt, max_tokens: 8, temperature: 0,
  });
  out.completion = { text: completion.choices[0].text, finish: completion.choices[0].finish_reason,
                     usage: completion.usage };

  const stream = await client.completions.create({
    model, prompt, max_tokens: 8, temperature: 0, stream: true,
  });
  let streamed = "";
  let chunks = 0;
  for await (const chunk of stream) {
    streamed += chunk.choices[0]?.text ?? "";
    chunks += 1;
  }
  out.completion_stream = { text: streamed, chunks };

  const chat = await client.chat.completions.create({
    model, messages, max_tokens: 6, temperature: 0,
  });
  out.chat = { content: chat.choices[0].message.content, role: chat.choices[0].message.role,
               finish: chat.choices[0].finish_reason, usage: chat.usage };

  const chatStream = await client.chat.completions.create({
    model, messages, max_tokens: 6, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let content = "";
  let usage = null;
  let finish = null;
  for await (const chunk of chatStream) {
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (choice) {
      content += choice.delta?.content ?? "";
      finish = choice.finish_reason ?? finish;
    }
  }
  out.chat_stream = { content, usage, finish };

  // Errors reach the client as its typed errors, with OpenAI's fields.
  try {
    await client.completions.create({ model, prompt, n: 2 });
    assert.fail("n = 2 was accepted");
  } catch (error) {
    assert.ok(error instanceof OpenAI.APIError, String(error));
    out.error = { status: error.status, param: error.param, type: error.type, message: error.message };
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
