// Two turns with the Vercel AI SDK's OpenAI-compatible provider: one
// generateText, one streamText whose history holds the first answer. Prints
// what the SDK saw as JSON; any error (AI_NoSuchToolError included) fails.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText } from "ai";

const chatforge = createOpenAICompatible({
  name: "chatforge",
  baseURL: process.env.CHATFORGE_BASE_URL,
  apiKey: process.env.CHATFORGE_TOKEN,
});
const model = chatforge(process.env.CHATFORGE_MODEL);

const first = await generateText({ model, prompt: "What is 6*7?", maxRetries: 0 });
const history = [
  { role: "user", content: "What is 6*7?" },
  { role: "assistant", content: first.text },
  { role: "user", content: "Sure?" },
];
const second = streamText({ model, messages: history, maxRetries: 0, onError: ({ error }) => { throw error; } });
let streamed = "";
for await (const part of second.fullStream) {
  if (part.type === "error") throw part.error;
  if (part.type === "text-delta") streamed += part.text;
}
console.log(JSON.stringify({
  generated: first.text,
  generatedToolCalls: first.toolCalls.length,
  streamed,
  streamedToolCalls: (await second.toolCalls).length,
  finishReason: await second.finishReason,
}));
